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
// The other way round, a client's end of stream already waiting behind its request when
// libmicrohttpd reads the request: the read is short, libmicrohttpd takes the socket to be
// drained, and epoll (edge-triggered) raises no new event for an end that came before the read.
// The connection stayed open until its idle timeout. After a short read on a served socket, a
// peek finds whether only the end is left; if so the read side is shut down, which wakes epoll,
// and libmicrohttpd reads the end once it has answered.
//
// Sockets numbered 2^20 and above are neither served nor held.

/// Marks `fd` as a connection's socket, from libmicrohttpd's start of the connection.
void mhd_half_close_serve (int fd);

/// Ends every mark on `fd`, before libmicrohttpd closes it.
void mhd_half_close_forget (int fd);

/// Holds `fd`, a connection's socket, from the suspension of a request until its answer is
/// queued.
void mhd_half_close_hold (int fd);

/// Ends the hold on `fd`.
void mhd_half_close_release (int fd);

#endif
