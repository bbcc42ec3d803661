/* exec: the new image starts fresh (our constructor runs again, with a new
 * trace file if it allocates), but exec runs no atexit handlers, so what this
 * image has buffered is written out first.  Only in the process that started
 * the writer: a vfork child shares its parent's memory and must not.
 * execl/execle/execlp reach execve inside libc and are not seen; they lose
 * at most the last DSMEMTRACE_FLUSH_MS of events. */
#include <unistd.h>

#include "preload.h"

#define LIBC "libc.so"

static void before_exec(void)
{
	if (!dsmt_in_hook && dsmt_writer_started() && !dsmt_cfg.disabled) {
		dsmt_in_hook = 1;
		dsmt_writer_flush_sync(1000);
		dsmt_in_hook = 0;
	}
}

DSMT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	__typeof__(&execve) f = DSMT_REAL(execve, LIBC);
	before_exec();
	return f ? f(path, argv, envp) : -1;
}

DSMT_EXPORT int execv(const char *path, char *const argv[])
{
	__typeof__(&execv) f = DSMT_REAL(execv, LIBC);
	before_exec();
	return f ? f(path, argv) : -1;
}

DSMT_EXPORT int execvp(const char *file, char *const argv[])
{
	__typeof__(&execvp) f = DSMT_REAL(execvp, LIBC);
	before_exec();
	return f ? f(file, argv) : -1;
}

DSMT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	__typeof__(&execvpe) f = DSMT_REAL(execvpe, LIBC);
	before_exec();
	return f ? f(file, argv, envp) : -1;
}

DSMT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	__typeof__(&fexecve) f = DSMT_REAL(fexecve, LIBC);
	before_exec();
	return f ? f(fd, argv, envp) : -1;
}
