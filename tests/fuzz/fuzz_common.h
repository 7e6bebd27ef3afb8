/* fuzz_common.h — shared by the libFuzzer harnesses: a private scratch folder, writing the fuzz
 * input to a file there (the parsers under test read files), and the error oracle every harness
 * applies: a rejected input must give exit class 2 with a message that starts with the file. */
#ifndef ND_FUZZ_COMMON_H
#define ND_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

/* LLVMFuzzerTestOneInput is what libFuzzer (or replay_main.c) calls once per input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Path of NAME inside this process's scratch folder (created on first use, removed at exit). */
const char *fz_path(const char *name);
/* Write size bytes to fz_path(name); returns that path. Aborts when the write fails. */
const char *fz_write(const char *name, const void *data, size_t size);
/* Remove fz_path(name) if it exists. */
void fz_remove(const char *name);

/* The oracle on a parser's result: rc 0 is fine; otherwise rc must equal e->code, be
 * ND_EXIT_BADINPUT, and the message must begin with `prefix` (the file name). Aborts (a crash
 * for libFuzzer) with the offending message otherwise. */
void fz_check_err(int rc, const nd_err *e, const char *prefix);
/* A parser of a file: loads path into *out (the parser's own result type), returns an exit class. */
typedef int (*fz_loader)(const char *path, void *out, nd_err *e);
/* Write the input to fz_path(name), parse it with load into out and apply fz_check_err: returns
 * the file's path when the parser accepted it, NULL when it refused it (rightly). */
const char *fz_parse(const char *name, const uint8_t *data, size_t size, fz_loader load, void *out);

struct nd_ckpt;
/* Open the checkpoint folder dir with the oracle applied: the checkpoint, or NULL when it was
 * (rightly) refused. */
struct nd_ckpt *fz_open_ckpt(const char *dir);
/* What every checkpoint harness asks of an opened checkpoint (its folder dir): the static checks
 * run or refuse with the oracle, and every module binds or refuses with it; a module that binds
 * has its tensors and its dimensions. */
void fz_check_ckpt(struct nd_ckpt *c, const char *dir);

/* Abort with a message when cond is false (an invariant of a parsed result). */
#define FZ_ASSERT(cond, ...) do { if (!(cond)) fz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); } while (0)
void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#endif
