/*
 * page.h — the web page that `promptscore serve` answers at GET / (web/index.html, one
 * self-contained file: inline CSS and JS, no external assets). The build turns it into a C array
 * with tools/embed.c ($(BUILD)/gen/page.c), so the server needs no file at run time.
 * ps_page_html is NUL-terminated; ps_page_html_len counts the bytes without the NUL.
 */
#ifndef PS_PAGE_H
#define PS_PAGE_H

#include <stddef.h>

extern const char ps_page_html[];
extern const size_t ps_page_html_len;

#endif /* PS_PAGE_H */
