/* LD_PRELOAD shim for Benchmarks/cost/action-cost.sh: counts malloc, calloc and realloc calls
 * process-wide and writes the totals to stderr on SIGUSR2 ("MALLOCS malloc=N calloc=N realloc=N").
 * Build: gcc -O2 -shared -fPIC -o malloc_count.so malloc_count.c */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc (size_t);
extern void *__libc_calloc (size_t, size_t);
extern void *__libc_realloc (void *, size_t);

static unsigned long mallocs, callocs, reallocs;

void *malloc (size_t size) { __atomic_add_fetch (&mallocs, 1, __ATOMIC_RELAXED); return __libc_malloc (size); }
void *calloc (size_t n, size_t size) { __atomic_add_fetch (&callocs, 1, __ATOMIC_RELAXED); return __libc_calloc (n, size); }
void *realloc (void *p, size_t size) { __atomic_add_fetch (&reallocs, 1, __ATOMIC_RELAXED); return __libc_realloc (p, size); }

static void report (int signal)
{
  (void) signal;
  char line[128];
  int length = snprintf (line, sizeof line, "MALLOCS malloc=%lu calloc=%lu realloc=%lu\n",
                         __atomic_load_n (&mallocs, __ATOMIC_RELAXED), __atomic_load_n (&callocs, __ATOMIC_RELAXED),
                         __atomic_load_n (&reallocs, __ATOMIC_RELAXED));
  if (length > 0) (void) write (2, line, (size_t) length);
}

__attribute__((constructor)) static void install (void) { signal (SIGUSR2, report); }
