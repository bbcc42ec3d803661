/* Fatal and terminating signals: flush what is buffered, then behave exactly
 * as without the library.
 *
 * Installed when the writer starts (the first allocation event).  The handler
 * asks the writer thread for a flush and waits for it at most a bounded time
 * (the interrupted thread may hold a lock the writer needs: malloc's, say),
 * then hands the signal on: to the previous handler if there was one, else by
 * restoring the previous disposition and raising again, so the exit status,
 * the core dump and Python's KeyboardInterrupt are what they would have been.
 * A program that installs its own handler later replaces ours; its normal
 * exit then flushes through atexit. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "tracer.h"

static const int fatal_sigs[] = {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGBUS};
#define NSIGS (int)(sizeof fatal_sigs / sizeof *fatal_sigs)
static struct sigaction old_act[NSIGS];
static struct sigaction old_toggle;

static int slot_of(int sig)
{
	for (int i = 0; i < NSIGS; i++)
		if (fatal_sigs[i] == sig)
			return i;
	return -1;
}

static void chain(int sig, siginfo_t *si, void *uc, const struct sigaction *old)
{
	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
		old->sa_sigaction(sig, si, uc);
	} else if (old->sa_handler == SIG_IGN) {
		/* ignored before us: still ignored */
	} else if (old->sa_handler == SIG_DFL) {
		sigaction(sig, old, NULL);
		/* a fault re-executes the faulting instruction on return and meets
		 * the default action there; a sent signal is raised again (it stays
		 * blocked until this handler returns) */
		if (!si || si->si_code <= 0 || sig == SIGTERM || sig == SIGINT || sig == SIGABRT)
			raise(sig);
	} else {
		old->sa_handler(sig);
	}
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	int i = slot_of(sig);
	int guard = dsmt_in_hook;
	dsmt_in_hook = 1;
	/* terminating signals get more time than faults, where the process state
	 * is already suspect */
	dsmt_writer_flush_sync(sig == SIGTERM || sig == SIGINT ? 1000 : 300);
	dsmt_in_hook = guard;
	if (i >= 0)
		chain(sig, si, uc, &old_act[i]);
	errno = saved;
}

void dsmt_signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < NSIGS; i++) {
		struct sigaction cur;
		if (sigaction(fatal_sigs[i], NULL, &cur) != 0)
			continue;
		/* respect an ignored SIGINT/SIGTERM (nohup, background jobs): leave it */
		if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
			continue;
		old_act[i] = cur;
		sigaction(fatal_sigs[i], &sa, NULL);
	}
}

static void on_toggle(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	int saved = errno;
	dsmt_toggle_request();
	errno = saved;
}

void dsmt_toggle_signal_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_toggle;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(dsmt_cfg.toggle_signal, &sa, &old_toggle);
}
