/*
 * kiln/log.h — one-line log messages to stderr, filtered by level
 * ([general] log_level). Plugins log through the host table instead.
 */
#ifndef KILN_LOG_H
#define KILN_LOG_H

#include "kiln/plugin.h" /* kiln_log_level */

#ifdef __cplusplus
extern "C" {
#endif

/* Messages above `level` are dropped. Default KILN_LOG_WARN. */
void kiln_log_set_level(kiln_log_level level);
kiln_log_level kiln_log_get_level(void);

/* Parses "error|warn|info|debug"; -1 if none of them. */
int kiln_log_level_parse(const char *name);

/* "kiln[who]: level: message\n" on stderr. */
void kiln_log(kiln_log_level level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void kiln_logv(kiln_log_level level, const char *who, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif
