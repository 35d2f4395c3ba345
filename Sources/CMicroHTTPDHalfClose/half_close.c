#define _GNU_SOURCE
#include "half_close.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum { marked_limit = 1 << 20 };
enum { served_mark = 1, held_mark = 2 };

// One byte a descriptor: zero pages until a connection with that number is served.
static atomic_uchar marks[marked_limit];

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

// After a short read: if all that is left is the client's end of stream, raise a new epoll edge
// (shutting the read side down wakes the socket's waiters) so that libmicrohttpd reads the end.
static void
raise_edge_if_ended (int fd)
{
  const int saved = errno;
  char probe;
  if (0 == resolve_next_recv () (fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT))
    (void) shutdown (fd, SHUT_RD);
  errno = saved;
}

ssize_t
recv (int fd, void *buffer, size_t length, int flags)
{
  const ssize_t received = resolve_next_recv () (fd, buffer, length, flags);
  if (0 != (flags & MSG_PEEK) || fd < 0 || fd >= marked_limit)
    return received;
  const unsigned char mark = atomic_load (&marks[fd]);
  if (0 == received && 0 < length && 0 != (mark & held_mark))
  {
    errno = EAGAIN;
    return -1;
  }
  if (0 < received && (size_t) received < length && 0 != (mark & served_mark))
    raise_edge_if_ended (fd);
  return received;
}

static void
set_mark (int fd, unsigned char mark, _Bool on)
{
  if (fd < 0 || fd >= marked_limit)
    return;
  if (on)
    atomic_fetch_or (&marks[fd], mark);
  else
    atomic_fetch_and (&marks[fd], (unsigned char) ~mark);
}

void
mhd_half_close_serve (int fd)
{
  set_mark (fd, served_mark, 1);
}

void
mhd_half_close_forget (int fd)
{
  set_mark (fd, served_mark | held_mark, 0);
}

void
mhd_half_close_hold (int fd)
{
  set_mark (fd, held_mark, 1);
}

void
mhd_half_close_release (int fd)
{
  set_mark (fd, held_mark, 0);
}
