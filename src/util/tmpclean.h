/* tmpclean.h — temporaries that a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, ...) must not leave behind.
 *
 * Every output is written to a temporary beside it and renamed into place when complete (trace,
 * report, bundle, safetensors shard). A writer registers the temporary's path while it exists;
 * the signal handler (installed once by main) unlinks every registered path, then lets the
 * signal kill the process as it would have. The handler only calls unlink and reads a fixed
 * array, both async-signal-safe. */
#ifndef ND_TMPCLEAN_H
#define ND_TMPCLEAN_H

#define ND_TMPCLEAN_SLOTS 16
#define ND_TMPCLEAN_PATH 4200

/* Install the handlers for every catchable signal whose default ends the process (idempotent). */
void nd_tmpclean_install(void);
/* Register a temporary; returns a slot (>= 0), or -1 when every slot is taken or the path is too
 * long (the file is then only cleaned by the writer's own error path). */
int nd_tmpclean_add(const char *path);
/* The same for a temporary folder (synth's staging folder): the handler removes it and what it
 * holds, three levels down, links removed and never followed. */
int nd_tmpclean_add_dir(const char *path);
/* mkstemps / mkdtemp with the new path registered before any signal can end the process (signals
 * are blocked from the creation to the registration); *slot as nd_tmpclean_add's */
int nd_tmpclean_mkstemps(char *tmpl, int suffix_len, int *slot);
char *nd_tmpclean_mkdtemp(char *tmpl, int *slot);
/* Remove every registered temporary now (async-signal-safe; other fatal handlers call it). */
void nd_tmpclean_now(void);
/* The temporary was renamed or removed by its writer: forget it. slot < 0 is ignored. */
/* Forget the path registered as `path` (the caller removes it itself). */
void nd_tmpclean_drop_path(const char *path);
void nd_tmpclean_drop(int slot);

#endif
