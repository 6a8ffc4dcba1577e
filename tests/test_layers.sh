#!/bin/sh
# The layering of src/ (tests/test_layers.py says what it checks): folders in their order, no
# upward or sideways include, no include or call cycle between modules.
exec python3 "$(dirname "$0")/test_layers.py"
