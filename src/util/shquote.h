/* shquote.h — a word of a printed or stored command, quoted for a POSIX shell, so that a path or an
 * override taken from the user's files is pasted as data, never run ($(...), `...`, ;, spaces). */
#ifndef ND_SHQUOTE_H
#define ND_SHQUOTE_H
#include <stddef.h>

/* Append s to out (NUL-terminated, capacity cap) as one shell word: as is when every byte is one of
 * A-Z a-z 0-9 _ . / : = , + - @ % (nothing a shell treats specially), else in single quotes with
 * each ' written as '\''; a word with a control byte (ESC, newline, DEL) as $'...' with that byte
 * written \xHH (bash, zsh, ksh; not dash), so that the printed command is safe on a terminal and
 * still pastes as the same bytes. Returns the length the result would have (as snprintf), so a caller
 * can tell truncation; out stays NUL-terminated. */
size_t nd_shquote_cat(char *out, size_t cap, const char *s);

/* 1 when cmd is "nvfp4dbg trace ..." made only of words nd_shquote_cat writes (plain bytes, '...'
 * with '\'' for a quote, $'...' with \xHH, \\ and \' escapes), one space between words: a command
 * read back from a file (a trace's stored next command) is shown as one to run only then; a crafted
 * one ("x; rm ..." or $(...)) is not. Its options are those next_command.c writes; --out only as
 * the last, naming X-repaired.h5 or X-repaired-N.h5. */
int nd_shcmd_is_ours(const char *cmd);
#endif
