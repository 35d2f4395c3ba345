#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H
// Swift cannot call C variadic functions. These static inline wrappers give every variadic
// libmicrohttpd entry point that MicroHTTP needs a fixed signature; besides them, the few
// epoll, eventfd and timerfd calls of MicroHTTP's DisconnectWatcher, Acceptor and BatchTicker
// (Glibc's Swift module has no sys/epoll.h, and struct epoll_event is packed).
#include <stdarg.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <microhttpd.h>
#ifdef __linux__
#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>
#endif

/// The libmicrohttpd whose internals the reads below marked with it were written against (where
/// its pool keeps a field, when it parses the arguments). Built against another version, they
/// fall back to what its public API promises: no obs-fold detection, no early 414 for a query
/// larger than the pool (the connection is then closed without an answer, as libmicrohttpd does).
#define MHD_SHIM_KNOWN_VERSION 0x00097500

/// Where libmicrohttpd's error log goes instead of stderr: `handler(cls, line)`, the line
/// formatted here (Swift cannot take a va_list apart). Owned by the server, alive until
/// after MHD_stop_daemon.
struct mhd_shim_logger
{
  void (*handler) (void *cls, const char *line);
  void *cls;
};

/// The MHD_OPTION_EXTERNAL_LOGGER callback: formats, then hands the line to the handler.
static inline void
mhd_shim_log (void *cls, const char *format, va_list arguments)
{
  const struct mhd_shim_logger *logger = (const struct mhd_shim_logger *) cls;
  char line[1024];
  vsnprintf (line, sizeof line, format, arguments);
  logger->handler (logger->cls, line);
}

/// One daemon's (one thread's) request-line parsing: `mhd_shim_check_target` sees the target
/// first and notes it; libmicrohttpd then unescapes the target's query arguments and, in place,
/// its path from that very address. `marks` (3 + `measured_target_limit` bytes): see
/// `mhd_shim_check_target`.
struct mhd_shim_parse_state
{
  void *marks;
  const char *target;
  /// Bytes of the connection's pool a request's query may take: its text, and 64 for each
  /// argument (the header record libmicrohttpd allocates for it there).
  size_t query_budget;
  /// Targets shorter than this are marked with their length (`marks` has 3 + this many bytes).
  size_t measured_target_limit;
};

/// libmicrohttpd's URL and argument unescaper, except that "%00" stays as it is: the path
/// reaches Swift as a C string, and a decoded NUL would silently cut it short
/// ("/sessions/ID%00/events" would be served as "/sessions/ID"). In the path "%2F" stays too:
/// an encoded slash is data within a segment (RFC 3986 §2.2), and decoded it made
/// "/sessions/ID%2Fevents" the event stream, a path a proxy in front sees as another.
/// Decodes in place, returns the new length (what MHD_OPTION_UNESCAPE_CALLBACK expects).
static inline size_t
mhd_shim_unescape_keeping_nul (void *cls, struct MHD_Connection *connection, char *text)
{
  (void) connection;
  struct mhd_shim_parse_state *state = (struct mhd_shim_parse_state *) cls;
  const int is_path = text == state->target;
  if (is_path) state->target = NULL;
  char *read = text, *write = text;
  while ('\0' != *read)
  {
    if ('%' == read[0] && '\0' != read[1] && '\0' != read[2])
    {
      int value = 0, ok = 1;
      for (int i = 1; i <= 2; i++)
      {
        char c = read[i];
        value <<= 4;
        if (c >= '0' && c <= '9') value |= c - '0';
        else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
        else ok = 0;
      }
      if (ok && 0 != value && !(is_path && '/' == value))
      {
        *write++ = (char) value;
        read += 3;
        continue;
      }
    }
    *write++ = *read++;
  }
  *write = '\0';
  return (size_t) (write - text);
}

/// MHD_OPTION_URI_LOG_CALLBACK: sees the request target as sent, before unescaping. RFC 9112
/// §3.2 allows no whitespace or control character in it, and libmicrohttpd 0.9.75 keeps them
/// in the path ("GET  /healthz  HTTP/1.1" asks for "/healthz "): such a request starts with
/// `marks`, which the access handler answers 400. A query larger than `query_budget` would run
/// the connection's pool dry as libmicrohttpd parses it, and it would then close the connection
/// without an answer: its arguments are cut off here (the '?' ends the target) and the request
/// starts with `marks + 2`, answered 414. Any other starts with `marks + 3 + its length` (as a C
/// string: up to a NUL byte, which libmicrohttpd keeps in it; the access handler finds the version
/// further on than that length puts it), or `marks + 1` past `measured_target_limit`. (Written for 0.9.75,
/// which finds the '?' before this call and parses the arguments after it: MHD_SHIM_KNOWN_VERSION.) (With this callback
/// installed, libmicrohttpd reports every request whose line it read as completed, also those
/// it ends before the access handler's first call: the marks tell them apart.)
static inline void *
mhd_shim_check_target (void *cls, const char *uri, struct MHD_Connection *connection)
{
  (void) connection;
  struct mhd_shim_parse_state *state = (struct mhd_shim_parse_state *) cls;
  state->target = uri;
  char *query = NULL;
  size_t length = 0, arguments = 0;
  for (const unsigned char *p = (const unsigned char *) uri; '\0' != *p; p++, length++)
  {
    if (*p <= 0x20 || 0x7F == *p) return state->marks;
    if ('?' == *p && NULL == query) { query = (char *) p; arguments = 1; }
    else if ('&' == *p && NULL != query) arguments++;
  }
#if MHD_VERSION == MHD_SHIM_KNOWN_VERSION
  if (NULL != query && length + 64 * arguments > state->query_budget)
  {
    query[1] = '\0';   /* libmicrohttpd parses the arguments after the '?' it found: none now */
    return (char *) state->marks + 2;
  }
  /* 0.9.75 puts the version one byte after the target; later versions after the last whitespace. */
  if (length < state->measured_target_limit) return (char *) state->marks + 3 + length;
#else
  (void) query;
  (void) arguments;
#endif
  return (char *) state->marks + 1;
}

/// Starts a daemon: the access handler, the completion callback and the error logger are
/// named; every other option comes in `options`, an array terminated by {MHD_OPTION_END, 0, NULL}.
/// `parse_state` is this daemon's own, for its request lines.
static inline struct MHD_Daemon *
mhd_shim_start_daemon (unsigned int flags,
                       MHD_AccessHandlerCallback handler, void *handler_cls,
                       MHD_RequestCompletedCallback completed, void *completed_cls,
                       MHD_NotifyConnectionCallback connection_notice, void *notice_cls,
                       struct mhd_shim_logger *logger,
                       struct mhd_shim_parse_state *parse_state,
                       struct MHD_OptionItem *options)
{
  /* The logger comes first: libmicrohttpd logs options it parses before it to stderr. */
  return MHD_start_daemon (flags, 0, NULL, NULL, handler, handler_cls,
                           MHD_OPTION_EXTERNAL_LOGGER, mhd_shim_log, logger,
                           MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                           MHD_OPTION_NOTIFY_CONNECTION, connection_notice, notice_cls,
                           MHD_OPTION_UNESCAPE_CALLBACK, mhd_shim_unescape_keeping_nul, parse_state,
                           MHD_OPTION_URI_LOG_CALLBACK, mhd_shim_check_target, parse_state,
                           MHD_OPTION_ARRAY, options,
                           MHD_OPTION_END);
}

/// Per-connection idle timeout in seconds; 0 = none.
static inline enum MHD_Result
mhd_shim_set_connection_timeout (struct MHD_Connection *connection, unsigned int seconds)
{
  return MHD_set_connection_option (connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/// What the connection notice stored for this connection (its "socket context"), or NULL.
static inline void *
mhd_shim_socket_context (struct MHD_Connection *connection)
{
  const union MHD_ConnectionInfo *info =
    MHD_get_connection_info (connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return (NULL == info) ? NULL : info->socket_context;
}

/// The daemon serving the connection, or NULL.
static inline struct MHD_Daemon *
mhd_shim_connection_daemon (struct MHD_Connection *connection)
{
  const union MHD_ConnectionInfo *info =
    MHD_get_connection_info (connection, MHD_CONNECTION_INFO_DAEMON);
  return (NULL == info) ? NULL : info->daemon;
}

/// The peer's address, or NULL.
static inline const struct sockaddr *
mhd_shim_client_address (struct MHD_Connection *connection)
{
  const union MHD_ConnectionInfo *info =
    MHD_get_connection_info (connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return (NULL == info) ? NULL : info->client_addr;
}

/// The connection's socket, or -1.
static inline int
mhd_shim_connection_fd (struct MHD_Connection *connection)
{
  const union MHD_ConnectionInfo *info =
    MHD_get_connection_info (connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return (NULL == info) ? -1 : (int) info->connect_fd;
}

/// Bytes of the connection's memory pool that the request's head holds until its answer is
/// sent, as libmicrohttpd 0.9.75 lays it out: the head's text, a 64-byte record (56, aligned to
/// 16) for each header field, query argument and cookie, the Cookie field's copy when it split
/// it into cookies, and 16 for the read buffer's alignment. libmicrohttpd builds the answer's
/// head in the rest of the pool and, when it does not fit, closes the connection without a
/// word. Not counted: empty lines before the request line, which it skips but keeps.
static inline size_t
mhd_shim_head_pool_use (struct MHD_Connection *connection)
{
#if MHD_VERSION != MHD_SHIM_KNOWN_VERSION
  (void) connection;
  return 0;   /* another layout: not reckoned */
#else
  const union MHD_ConnectionInfo *info =
    MHD_get_connection_info (connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  size_t used = 16 + ((NULL == info) ? 0 : info->header_size);
  const int records = MHD_get_connection_values (
    connection, MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND | MHD_FOOTER_KIND, NULL, NULL);
  if (records > 0) used += 64 * (size_t) records;
  const char *cookie = NULL;
  size_t cookie_size = 0;
  if (MHD_get_connection_values (connection, MHD_COOKIE_KIND, NULL, NULL) > 0
      && MHD_YES == MHD_lookup_connection_value_n (connection, MHD_HEADER_KIND, "Cookie", 6, &cookie, &cookie_size))
    used += (cookie_size + 1 + 15) / 16 * 16;
  return used;
#endif
}

/// Header fields and GET arguments in one pass (Swift imports MHD_ValueKind as a closed
/// enum, so it cannot pass the combined mask itself).
static inline int
mhd_shim_get_headers_and_arguments (struct MHD_Connection *connection,
                                    MHD_KeyValueIterator iterator, void *iterator_cls)
{
  return MHD_get_connection_values (connection,
                                    (enum MHD_ValueKind) (MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND),
                                    iterator, iterator_cls);
}

/// What RFC 9112 framing checks need from a request's header fields, in one pass.
struct mhd_shim_framing
{
  unsigned int hosts;            /* Host fields */
  const char *first_host;
  unsigned int lengths;          /* Content-Length fields */
  int lengths_differ;            /* two Content-Length values are not the same text */
  const char *first_length;
  unsigned int encodings;        /* Transfer-Encoding fields */
  const char *first_encoding;
  unsigned int spaced_names;     /* field names with a space or tab in them ("Name : value") */
  unsigned int cr_fields;        /* fields with a CR in their name or value (a NUL ends the value) */
  unsigned int folded_fields;    /* fields continued on the next line (obs-fold) */
  unsigned int nameless_fields;  /* lines that start with their colon (": value") */
  const char *nul_field;         /* the name of the first field whose line held a NUL, or NULL */
  const char *previous_name;     /* the field before, and where its value ended */
  const char *previous_end;
};

/// Whether a field was continued on the next line (obs-fold). libmicrohttpd 0.9.75 appends the
/// continuation to the field's *name* ("Content-Length:\r\n 35" becomes a field
/// "Content-Length35" with an empty value, and the body is read as the next request). It
/// parses fields in place, replacing the colon and each line's CR and LF with NULs, so:
/// - a value that does not follow its name, the colon's NUL and optional whitespace had its
///   name moved elsewhere in the pool to grow it;
/// - a name that could grow in place (it ended where the pool's allocations did) wrote the
///   continuation over the colon, but the continuation line is still where it was: right
///   after the value's line, starting with SP or HTAB.
/// Every byte read lies in the pool: a field's line is followed by at least the blank line,
/// and the pool's end holds libmicrohttpd's own records of the fields. (After a bare-LF blank
/// line the second byte read is the body's first: one starting with SP or HTAB sent with bare
/// LFs is taken for a fold.) Written against MHD_SHIM_KNOWN_VERSION's pool.
static inline int
mhd_shim_field_is_folded (const char *key, size_t key_size, const char *value, size_t value_size)
{
#if MHD_VERSION != MHD_SHIM_KNOWN_VERSION
  (void) key; (void) key_size; (void) value; (void) value_size;
  return 0;
#else
  const char *after_colon = key + key_size + 1;
  if (NULL == value) return 0;
  if (value < after_colon || value - after_colon > 1024) return 1;
  for (const char *p = after_colon; p < value; p++)
    if (' ' != *p && '\t' != *p) return 1;
  const char *next = value + value_size + 1;   /* past the NUL that ended the value's line */
  if ('\0' == *next) next++;                   /* the LF of a CRLF */
  return ' ' == *next || '\t' == *next;
#endif
}

/// Whether only the ends of lines lie between `from` (the NUL that ended a field's value) and
/// `to` (the next field's name, or the end of the head): `most` NULs at most, and nothing else.
/// libmicrohttpd 0.9.75 reads a value up to its first NUL, so a NUL in a line cut the value
/// there ("key\0one" and "key\0two" read alike); it writes a NUL over each line's CR and LF, so
/// one line ending leaves one or two of them here, and a cut leaves more, or other bytes. (A
/// NUL just before a bare-LF line's end reads as a CRLF.) `from` and `to` lie in the head's
/// text, read in place; `to` before `from` (a folded field, moved in the pool) is not judged.
static inline int
mhd_shim_only_line_ends (const char *from, const char *to, size_t most)
{
#if MHD_VERSION != MHD_SHIM_KNOWN_VERSION
  (void) from; (void) to; (void) most;
  return 1;
#else
  if (to <= from) return 1;
  if ((size_t) (to - from) > most) return 0;
  for (const char *p = from; p < to; p++)
    if ('\0' != *p) return 0;
  return 1;
#endif
}

static inline enum MHD_Result
mhd_shim_framing_field (void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                        const char *value, size_t value_size)
{
  struct mhd_shim_framing *framing = (struct mhd_shim_framing *) cls;
  (void) kind;
  if (NULL == key) return MHD_YES;
  if (NULL != strpbrk (key, " \t"))
    framing->spaced_names++;
  if (NULL != memchr (key, '\r', key_size) || (NULL != value && NULL != memchr (value, '\r', value_size)))
    framing->cr_fields++;
  if (mhd_shim_field_is_folded (key, key_size, value, value_size))
    framing->folded_fields++;
  if (0 == key_size)
    framing->nameless_fields++;
  if (NULL == framing->nul_field && NULL != framing->previous_end
      && !mhd_shim_only_line_ends (framing->previous_end, key, 2))
    framing->nul_field = framing->previous_name;
  framing->previous_name = key;
  framing->previous_end = (NULL == value) ? NULL : value + value_size;
  if (0 == strcasecmp (key, MHD_HTTP_HEADER_TRANSFER_ENCODING))
  {
    if (0 == framing->encodings++)
      framing->first_encoding = value;
  }
  else if (0 == strcasecmp (key, MHD_HTTP_HEADER_HOST))
  {
    if (0 == framing->hosts++)
      framing->first_host = value;
  }
  else if (0 == strcasecmp (key, MHD_HTTP_HEADER_CONTENT_LENGTH))
  {
    if (0 == framing->lengths++)
      framing->first_length = value;
    else if (NULL == value || NULL == framing->first_length || 0 != strcmp (value, framing->first_length))
      framing->lengths_differ = 1;
  }
  return MHD_YES;
}

/// `method`: the access handler's, where the head's text starts (libmicrohttpd counts the
/// head's size from it), so that the last field's line is checked up to the blank line's end.
static inline struct mhd_shim_framing
mhd_shim_framing_fields (struct MHD_Connection *connection, const char *method)
{
  struct mhd_shim_framing framing = { 0, NULL, 0, 0, NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL };
  MHD_get_connection_values_n (connection, MHD_HEADER_KIND, mhd_shim_framing_field, &framing);
  const union MHD_ConnectionInfo *info =
    MHD_get_connection_info (connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  /* The last field's line end and the blank line's: four NULs at most. */
  if (NULL == framing.nul_field && NULL != framing.previous_end && NULL != info && NULL != method
      && !mhd_shim_only_line_ends (framing.previous_end, method + info->header_size, 4))
    framing.nul_field = framing.previous_name;
  return framing;
}


/// Request-head deadlines, one slot per socket descriptor (descriptors are small and dense:
/// no per-connection allocation, no lock). A slot holds 0 (no deadline), a deadline in
/// CLOCK_MONOTONIC milliseconds (optionally with MHD_SHIM_HEAD_REFUSE set: the connection is
/// to be answered 503), or MHD_SHIM_HEAD_CUTTING while the sweeper shuts the socket down.
/// The slot of a closing connection is released (`mhd_shim_heads_release`, from the connection's
/// CLOSED notice, which libmicrohttpd sends before it closes the descriptor) only once no cut is
/// under way: so `shutdown` only ever reaches a descriptor libmicrohttpd still owns, never one
/// reused by another socket or file.
#define MHD_SHIM_HEAD_REFUSE ((int64_t) 1 << 62)
#define MHD_SHIM_HEAD_DEADLINE ((((int64_t) 1) << 62) - 1)
#define MHD_SHIM_HEAD_CUTTING ((int64_t) -1)
/// MHD_SHIM_HEAD_REFUSE as Swift sees it (it imports no macro with a cast or a shift).
static const int64_t mhd_shim_head_refuse = MHD_SHIM_HEAD_REFUSE;

struct mhd_shim_heads
{
  _Atomic int64_t *slots;
  int capacity;
  _Atomic int highest;       /* the highest descriptor ever armed, where a sweep ends */
};

/// Swift sees the table as an opaque `void *` (it imports no C atomics).
static inline void *
mhd_shim_heads_create (int capacity)
{
  struct mhd_shim_heads *heads = (struct mhd_shim_heads *) calloc (1, sizeof (struct mhd_shim_heads));
  if (NULL == heads) return NULL;
  /* calloc of a large table maps zero pages lazily: only slots of descriptors used cost memory */
  heads->slots = (_Atomic int64_t *) calloc ((size_t) capacity, sizeof (int64_t));
  if (NULL == heads->slots)
  {
    free (heads);
    return NULL;
  }
  heads->capacity = capacity;
  atomic_init (&heads->highest, -1);
  return heads;
}

static inline void
mhd_shim_heads_destroy (void *table)
{
  struct mhd_shim_heads *heads = (struct mhd_shim_heads *) table;
  free ((void *) heads->slots);
  free (heads);
}

static inline int64_t
mhd_shim_now_ms (void)
{
  struct timespec now;
  clock_gettime (CLOCK_MONOTONIC, &now);
  return (int64_t) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/// A new connection (the acceptor's thread, before libmicrohttpd has it): its value.
static inline void
mhd_shim_heads_arm (void *table, int fd, int64_t value)
{
  struct mhd_shim_heads *heads = (struct mhd_shim_heads *) table;
  if (fd < 0 || fd >= heads->capacity) return;
  atomic_store (&heads->slots[fd], value);
  int highest = atomic_load (&heads->highest);
  while (fd > highest && !atomic_compare_exchange_weak (&heads->highest, &highest, fd))
    ;
}

/// Sets the slot to `value` unless a cut is under way; returns what it held.
static inline int64_t
mhd_shim_heads_set (void *table, int fd, int64_t value)
{
  struct mhd_shim_heads *heads = (struct mhd_shim_heads *) table;
  if (fd < 0 || fd >= heads->capacity) return 0;
  int64_t old = atomic_load (&heads->slots[fd]);
  while (MHD_SHIM_HEAD_CUTTING != old && !atomic_compare_exchange_weak (&heads->slots[fd], &old, value))
    ;
  return old;
}

/// The connection is closing (its CLOSED notice): waits out a cut under way, then empties the slot.
static inline void
mhd_shim_heads_release (void *table, int fd)
{
  struct mhd_shim_heads *heads = (struct mhd_shim_heads *) table;
  if (fd < 0 || fd >= heads->capacity) return;
  int64_t old = atomic_load (&heads->slots[fd]);
  while (!(MHD_SHIM_HEAD_CUTTING != old && atomic_compare_exchange_weak (&heads->slots[fd], &old, 0)))
  {
    if (MHD_SHIM_HEAD_CUTTING == old)
    {
      sched_yield ();
      old = atomic_load (&heads->slots[fd]);
    }
  }
}

/// Shuts down (never closes) the socket of every connection past its deadline at `now`, so
/// that libmicrohttpd sees it end and closes it itself; returns how many.
static inline int
mhd_shim_heads_sweep (void *table, int64_t now)
{
  struct mhd_shim_heads *heads = (struct mhd_shim_heads *) table;
  int cut = 0;
  int highest = atomic_load (&heads->highest);
  for (int fd = 0; fd <= highest; fd++)
  {
    int64_t value = atomic_load_explicit (&heads->slots[fd], memory_order_relaxed);
    int64_t deadline = value & MHD_SHIM_HEAD_DEADLINE;
    if (value <= 0 || 0 == deadline || deadline > now) continue;
    if (!atomic_compare_exchange_strong (&heads->slots[fd], &value, MHD_SHIM_HEAD_CUTTING)) continue;
    shutdown (fd, SHUT_RDWR);
    atomic_store (&heads->slots[fd], 0);
    cut++;
  }
  return cut;
}

#ifdef __linux__
/// An epoll set with an eventfd in it under token 0, to wake its waiter. Returns the epoll
/// descriptor and stores the eventfd in *wakeup, or returns -1.
static inline int
mhd_shim_watch_create (int *wakeup)
{
  int ep = epoll_create1 (EPOLL_CLOEXEC);
  if (ep < 0) return -1;
  int efd = eventfd (0, EFD_CLOEXEC);
  struct epoll_event event = { .events = EPOLLIN, .data.u64 = 0 };
  if (efd < 0 || 0 != epoll_ctl (ep, EPOLL_CTL_ADD, efd, &event))
  {
    if (efd >= 0) close (efd);
    close (ep);
    return -1;
  }
  *wakeup = efd;
  return ep;
}

/// Watches `fd` for the peer's FIN (EPOLLRDHUP), a hang-up or an error (RST), once; never for
/// readable data.
static inline int
mhd_shim_watch_add (int ep, int fd, uint64_t token)
{
  struct epoll_event event = { .events = EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLONESHOT,
                               .data.u64 = token };
  return epoll_ctl (ep, EPOLL_CTL_ADD, fd, &event);
}

static inline int
mhd_shim_watch_remove (int ep, int fd)
{
  struct epoll_event event = { 0 };
  return epoll_ctl (ep, EPOLL_CTL_DEL, fd, &event);
}

/// Waits (no timeout) and stores the tokens of up to `max` events; -1 with errno on error,
/// EINTR retried here.
static inline int
mhd_shim_watch_wait (int ep, uint64_t *tokens, int max)
{
  struct epoll_event events[256];
  if (max > 256) max = 256;
  int count;
  do count = epoll_wait (ep, events, max, -1);
  while (count < 0 && EINTR == errno);
  for (int i = 0; i < count; i++) tokens[i] = events[i].data.u64;
  return count;
}

/// A non-blocking eventfd to wake a thread blocked in poll(); -1 on error.
static inline int
mhd_shim_wakeup_create (void)
{
  return eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/// libmicrohttpd 0.9.75 (and 1.0.1) reads epoll events 128 at a time; after a full batch it
/// waits for more with the timeout it chose before (up to a connection timeout) and serves
/// none of the batch meanwhile. An event every period in the daemon's epoll set ends such a
/// wait. The period comes from this timer (-1 on error), which one thread reads (a periodic
/// timerfd re-arms only when read); the events come from each daemon's own nudge
/// (`mhd_shim_batch_nudge_create`), which that thread writes at each tick.
static inline int
mhd_shim_batch_ticker_create (long interval_ms)
{
  int timer = timerfd_create (CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (timer < 0)
    return -1;
  struct timespec period = { interval_ms / 1000, (interval_ms % 1000) * 1000000L };
  struct itimerspec every = { period, period };
  if (0 != timerfd_settime (timer, 0, &every, NULL))
  {
    close (timer);
    return -1;
  }
  return timer;
}

/// The epoll set of `daemon` (one epoll thread, no pool: a pool's workers have epoll sets of
/// their own, out of reach); -1 if it has none.
static inline int
mhd_shim_daemon_epoll_fd (struct MHD_Daemon *daemon)
{
  const union MHD_DaemonInfo *info = MHD_get_daemon_info (daemon, MHD_DAEMON_INFO_EPOLL_FD);
  return NULL == info ? -1 : info->epoll_fd;
}

/// An eventfd in the epoll set `ep`; -1 on error. Edge-triggered and never read, so each write
/// is one event and the descriptor is still readable when epoll_wait collects it: a timerfd
/// shared with the thread that reads it loses the events that thread reads first (epoll drops
/// an edge whose descriptor is no longer ready). Its events carry a NULL pointer, which
/// libmicrohttpd skips.
static inline int
mhd_shim_batch_nudge_create (int ep)
{
  if (ep < 0)
    return -1;
  int nudge = mhd_shim_wakeup_create ();
  if (nudge < 0)
    return -1;
  struct epoll_event event;
  memset (&event, 0, sizeof (event));
  event.events = EPOLLIN | EPOLLET;
  event.data.ptr = NULL;
  if (0 != epoll_ctl (ep, EPOLL_CTL_ADD, nudge, &event))
  {
    close (nudge);
    return -1;
  }
  return nudge;
}

/// accept4 (a GNU extension Glibc's Swift module leaves out): the new socket is non-blocking
/// and close-on-exec from the start.
static inline int
mhd_shim_accept (int listener, struct sockaddr *address, socklen_t *length)
{
  return accept4 (listener, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif

#endif
