// libmicrohttpd 0.9.75 (and 1.0.1) reads epoll events 128 at a time. After a full batch of 128
// it calls epoll_wait again, with the timeout it chose before the first call, and serves none
// of the connections gathered so far until that call returns. When the ready connections are a
// multiple of 128, the call waits for an unrelated event (or a connection's timeout) while the
// whole batch waits with it: at 256 busy keep-alive connections the server idles between
// batches (BENCHMARKS.md, "A full batch served at once").
//
// This target defines `epoll_wait`, which libmicrohttpd calls through its PLT, so that the
// executable's definition is the one it calls (as `recv` in half_close.c). A call that follows
// a full batch on the same thread and the same epoll set does not wait: it collects what is
// ready now, and libmicrohttpd's loop ends and serves the batch. Every other call passes its
// timeout on unchanged. Calling the same set again after a full array is what any event loop
// does to drain it, so not waiting then changes nothing but the latency.
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/epoll.h>

// The epoll set whose last wait on this thread filled the caller's array; -1 when none did.
static __thread int full_set = -1;

int
epoll_wait (int ep, struct epoll_event *events, int max, int timeout)
{
  if (ep == full_set)
    timeout = 0;
  // epoll_pwait without a signal mask is epoll_wait (and a thread sanitizer intercepts it too).
  const int count = epoll_pwait (ep, events, max, timeout, NULL);
  full_set = (0 < max && count == max) ? ep : -1;
  return count;
}
