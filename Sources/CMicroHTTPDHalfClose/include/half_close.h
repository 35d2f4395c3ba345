#ifndef CMICROHTTPD_HALF_CLOSE_H
#define CMICROHTTPD_HALF_CLOSE_H
// A client may send its request and then the end of its stream (shutdown(SHUT_WR), as `nc -N`
// does) before it reads the answer. libmicrohttpd 0.9.75 reads a resumed connection before it
// calls the application back for the answer, and on reading that end in the middle of a request
// it closes without answering: a deferred answer (suspend, then resume once it is ready) was
// lost, although the change it answered for was made.
//
// This target defines `recv`, which libmicrohttpd calls through its PLT, so that the
// executable's definition is the one it calls. Every call passes straight on to the C library's
// (or to a thread sanitizer's interceptor), except one: while a connection's socket is held, an
// end of stream read on it is reported as "nothing to read yet" (EAGAIN). libmicrohttpd then
// answers; afterwards it reads the socket again (a resumed connection goes back into its epoll
// set, which reports the end at once), finds the end, and closes.
//
// Sockets numbered 2^20 and above are not held.

/// Holds `fd`, a connection's socket, from the suspension of a request until its answer is
/// queued.
void mhd_half_close_hold (int fd);

/// Ends the hold on `fd`.
void mhd_half_close_release (int fd);

#endif
