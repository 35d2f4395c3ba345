#define _GNU_SOURCE
#include "half_close.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum { held_limit = 1 << 20 };

// One flag a descriptor: zero pages until a connection with that number is held.
static atomic_bool held[held_limit];

typedef ssize_t (*recv_function) (int, void *, size_t, int);
static _Atomic (recv_function) next_recv;

// A thread sanitizer's own `recv` is weak, so this one takes its place: call its interceptor.
extern ssize_t __interceptor_recv (int, void *, size_t, int) __attribute__ ((weak));

static ssize_t
system_recv (int fd, void *buffer, size_t length, int flags)
{
  return syscall (SYS_recvfrom, fd, buffer, length, flags, NULL, NULL);
}

static recv_function
resolve_next_recv (void)
{
  recv_function found = atomic_load_explicit (&next_recv, memory_order_relaxed);
  if (NULL != found)
    return found;
  if (NULL != __interceptor_recv)
    found = __interceptor_recv;
  else
    found = (recv_function) dlsym (RTLD_NEXT, "recv");
  if (NULL == found)
    found = system_recv;
  atomic_store_explicit (&next_recv, found, memory_order_relaxed);
  return found;
}

// Resolved at load time, not on a first call that may come from a signal handler (dlsym is not
// async-signal-safe).
__attribute__ ((constructor)) static void
resolve_at_load (void)
{
  (void) resolve_next_recv ();
}

ssize_t
recv (int fd, void *buffer, size_t length, int flags)
{
  ssize_t received = resolve_next_recv () (fd, buffer, length, flags);
  if (0 == received && 0 < length && 0 == (flags & MSG_PEEK) && 0 <= fd && fd < held_limit
      && atomic_load (&held[fd]))
  {
    errno = EAGAIN;
    return -1;
  }
  return received;
}

void
mhd_half_close_hold (int fd)
{
  if (0 <= fd && fd < held_limit)
    atomic_store (&held[fd], true);
}

void
mhd_half_close_release (int fd)
{
  if (0 <= fd && fd < held_limit)
    atomic_store (&held[fd], false);
}
