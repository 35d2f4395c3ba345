/*
 * sseload — a single-process, epoll-based SSE load client for the reactord benchmark (issue 5).
 *
 * Modes (first argument):
 *   sub       open N subscribers on --path, hold them --duration s, count events and latencies
 *   pub       publish actions (--rate R/s, 0 = as fast as possible) on --pub-conns keep-alive
 *             connections for --duration s (or --count publishes)
 *   pubsub    open N subscribers, wait until every one has its response headers, then publish
 *             as in `pub`, then wait (--drain s) until every subscriber has every message
 *   idle      open N subscribers, hold them --duration s, report how many are still open and the
 *             heartbeats (SSE comment lines) seen
 *   sessions  create --count reactord sessions (POST /sessions) and write their ids, one a line,
 *             to --out
 *
 * Publish formats (--format):
 *   reactord  POST /action  {"session":ID,"action":{"type":"alert","message":"<t_us>"}}
 *             returns to subscribers as `event: pulse` data {"name":"alertMessage","value":"<t_us>"}
 *   nchan     POST /pub/NAME with body <t_us>; arrives on /sub/NAME as an unnamed message
 *   user      PUT /user {"id":"bench","name":"<t_us>"} with Authorization: Bearer --admin-token;
 *             arrives on every session's stream as `event: state` whose user carries <t_us>
 *   increase  POST /action {"session":ID,"action":{"type":"increase"}} (no timestamp)
 *
 * <t_us> is CLOCK_REALTIME in microseconds taken just before the request is written. A subscriber
 * takes the first run of 13..19 digits in the data of an event of the timestamp-carrying type
 * (--ts-event; by format: pulse, message, state), after the JSON key --ts-key when there is one
 * (by format: "value":", none, "name":"), and records now - t_us in a histogram.
 * Timestamps older than the start of the publish phase are ignored (stale state on connect).
 *
 * Loss: in pubsub, every live subscriber should receive one timestamped event per publish
 * answered 2xx; lost = sum of the shortfalls, dup = sum of the excess. Where the SSE `id` is an
 * integer (reactord) a subscriber also checks that ids go up by exactly one: id_gaps counts the
 * missing ids, id_dups the repeated or backward ones.
 *
 * CPU: on loopback most of the client's cost is the kernel's recv path (one recv per event when
 * the client keeps up, each also acking on the server's behalf); --batch-us trades latency for
 * fewer, larger reads. The result line always carries the client's own CPU use (getrusage).
 *
 * Only ever connects to 127.0.0.1. Every loop is bounded in count and time. Output: one line
 * "result key=value ..." on stdout (plus progress on stderr unless --quiet).
 *
 * Build: gcc -O2 -Wall -o sseload sseload.c   (libc only)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ limits */
#define MAX_CONNS        60000
#define LINE_CAP         256      /* SSE line bytes kept per subscriber (longer lines truncated) */
#define DATA_CAP         256      /* SSE data bytes kept per event */
#define EVNAME_CAP       16
#define HDR_CAP          4096     /* response header bytes kept */
#define BODY_CAP         1024     /* response body bytes kept (sessions mode reads the id) */
#define REQ_CAP          1024
#define READ_BUF         (64 * 1024)
#define MAX_READS_PER_WAKE 4      /* reads per readable socket per epoll round (fairness) */
#define MAX_PUB_RECONNECTS 1000

/* ------------------------------------------------------------------ time */
static inline int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ------------------------------------------------------------------ histogram (µs) */
/* values < 1024 exact; above, 512 sub-buckets per power of two (< 0.2 % error). */
#define H_LIN 1024
#define H_SUB 512
#define H_EXP 44
#define H_SIZE (H_LIN + (H_EXP - 10) * H_SUB)
typedef struct { uint64_t n, max, sum; uint64_t b[H_SIZE]; } hist_t;

static int h_index(uint64_t v) {
    if (v < H_LIN) return (int)v;
    int e = 63 - __builtin_clzll(v);          /* e >= 10 */
    if (e >= H_EXP) return H_SIZE - 1;
    int sub = (int)((v >> (e - 9)) & (H_SUB - 1));
    return H_LIN + (e - 10) * H_SUB + sub;
}
static uint64_t h_value(int i) {               /* upper edge of bucket i */
    if (i < H_LIN) return (uint64_t)i;
    int e = (i - H_LIN) / H_SUB + 10, sub = (i - H_LIN) % H_SUB;
    uint64_t lo = ((uint64_t)1 << e) + ((uint64_t)sub << (e - 9));
    return lo + ((uint64_t)1 << (e - 9)) - 1;
}
static void h_add(hist_t *h, int64_t v) {
    if (v < 0) v = 0;
    h->b[h_index((uint64_t)v)]++;
    h->n++; h->sum += (uint64_t)v;
    if ((uint64_t)v > h->max) h->max = (uint64_t)v;
}
static uint64_t h_pct(const hist_t *h, double p) {
    if (h->n == 0) return 0;
    uint64_t want = (uint64_t)((double)h->n * p / 100.0 + 0.999999);
    if (want < 1) want = 1;
    uint64_t seen = 0;
    for (int i = 0; i < H_SIZE; i++) {
        seen += h->b[i];
        if (seen >= want) { uint64_t v = h_value(i); return v > h->max ? h->max : v; }
    }
    return h->max;
}

/* ------------------------------------------------------------------ options */
enum { M_SUB, M_PUB, M_PUBSUB, M_IDLE, M_SESSIONS };
enum { F_REACTORD, F_NCHAN, F_USER, F_INCREASE };

static struct {
    int mode, format;
    int port;
    const char *path;          /* subscribe path; "%s" is replaced by an id from ids_file */
    const char *ids_file;
    const char *pub_path;
    const char *session;
    const char *admin_token;
    const char *ts_event;
    const char *ts_key;
    const char *out;
    const char *ready_file;
    int pub_port;              /* where publishes go (default --port): another node of a cluster */
    long subs;
    double rate;               /* publishes per second; 0 = as fast as possible */
    int pub_conns;
    double duration;
    long count;                /* max publishes (0 = no limit) */
    double drain;
    double settle;
    double connect_timeout;
    int connect_parallel;
    int quiet;
    int batch_us;              /* pause after each epoll round while publishing/holding */
    int rst_at_exit;           /* end every connection with RST instead of FIN */
} opt = {
    .port = 0, .pub_port = 0, .subs = 0, .rate = 0, .pub_conns = 1, .duration = 5, .count = 0,
    .drain = 10, .settle = 0.2, .connect_timeout = 60, .connect_parallel = 256,
};

/* ------------------------------------------------------------------ connections */
enum { K_SUB, K_PUB };
enum { S_FREE, S_CONNECTING, S_SENDING, S_HEADERS, S_BODY, S_IDLE, S_CLOSED };
enum { C_SIZE, C_EXT, C_DATA, C_DATA_END, C_TRAILER_START, C_TRAILER_LINE, C_DONE };

typedef struct conn {
    int fd;
    uint8_t kind, state;
    uint8_t chunked, cstate;
    uint8_t conn_close, has_clen, cr_pending, line_trunc;
    uint8_t have_last_id, id_is_int, ended, counted_ready;
    int status;
    uint64_t cremain;           /* chunk bytes left, or content-length bytes left */
    int64_t body_read;
    /* request */
    const char *req; uint32_t req_len, req_off; char *req_own;
    int64_t sent_us;            /* pub: when the in-flight request was written */
    /* headers */
    char *hbuf; uint32_t hlen; uint32_t hmatch;
    char *bbuf; uint32_t blen;  /* pub: first bytes of the body */
    /* SSE */
    char line[LINE_CAP]; uint16_t llen;
    char ev[EVNAME_CAP]; uint8_t evlen;
    char data[DATA_CAP]; uint16_t dlen; uint8_t has_data;
    char idbuf[32]; uint8_t idlen; uint8_t has_id;
    int64_t last_id;
    /* counters */
    uint32_t events, ts_events, comments, id_gaps, id_dups;
    int reconnects;
} conn_t;

static conn_t *conns;          /* [0, subs) subscribers, then publishers */
static int epfd;
static char rbuf[READ_BUF];

/* global counters */
static struct {
    long sub_ready, sub_connecting, sub_open, sub_failed, sub_http_err, sub_dropped, sub_ended;
    long connect_errors;
    long events, ts_events, stale_ts, comments;
    int64_t first_ts_rx, last_ts_rx;
    long pub_sent, pub_ok, pub_err, pub_inflight, pub_reconnects;
    int64_t pub_start, pub_end;
    uint64_t bytes_rx;
    long sessions_written;
} g;
static hist_t lat_hist, pub_hist;
static int64_t phase_start_us;  /* timestamps older than this are stale */
static char **ids; static long nids;
static FILE *out_fp;
static const char *ts_event_name;   /* "" matches unnamed events (and "message") */
static int ts_event_any;

static void logf_(const char *fmt, ...) {
    if (opt.quiet) return;
    va_list ap; va_start(ap, fmt);
    fputs("sseload: ", stderr); vfprintf(stderr, fmt, ap); fputc('\n', stderr);
    va_end(ap);
}
static void die(const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    fputs("sseload: ", stderr); vfprintf(stderr, fmt, ap); fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* ------------------------------------------------------------------ sockets */
static struct sockaddr_in target, pub_target;

static int open_socket(conn_t *c) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (c->kind == K_PUB) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }
    const struct sockaddr_in *to = c->kind == K_PUB ? &pub_target : &target;
    int r = connect(fd, (const struct sockaddr *)to, sizeof *to);
    if (r < 0 && errno != EINPROGRESS) { int e = errno; close(fd); errno = e; return -1; }
    c->fd = fd;
    c->state = S_CONNECTING;
    struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) { close(fd); c->fd = -1; return -1; }
    return 0;
}

static void set_events(conn_t *c, uint32_t events) {
    struct epoll_event ev = { .events = events, .data.ptr = c };
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void reset_response(conn_t *c) {
    c->status = 0; c->chunked = 0; c->cstate = C_SIZE; c->cremain = 0; c->has_clen = 0;
    c->conn_close = 0; c->hlen = 0; c->hmatch = 0; c->blen = 0; c->body_read = 0;
}

static void close_conn(conn_t *c) {
    if (c->fd >= 0) { epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL); close(c->fd); c->fd = -1; }
    c->state = S_CLOSED;
    free(c->hbuf); c->hbuf = NULL;
}

/* ------------------------------------------------------------------ SSE parsing */
static const char *ts_key;       /* the JSON key whose string value is the timestamp, or NULL */
static size_t ts_key_len;

static int64_t parse_ts(const char *d, int n) {
    if (ts_key) {                /* find "key":" and read its value */
        const char *hit = memmem(d, (size_t)n, ts_key, ts_key_len);
        if (!hit) return -1;
        int off = (int)(hit - d + (long)ts_key_len);
        d += off; n -= off;
    }
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)d[i])) continue;
        int j = i; int64_t v = 0;
        while (j < n && isdigit((unsigned char)d[j]) && j - i < 20) { v = v * 10 + (d[j] - '0'); j++; }
        if (j - i >= 13 && j - i <= 19) return v;
        i = j;
    }
    return -1;
}

static int is_ts_event(conn_t *c) {
    if (ts_event_any) return 1;
    if (ts_event_name[0] == 0) return c->evlen == 0 || (c->evlen == 7 && memcmp(c->ev, "message", 7) == 0);
    return (size_t)c->evlen == strlen(ts_event_name) && memcmp(c->ev, ts_event_name, c->evlen) == 0;
}

static void dispatch_event(conn_t *c, int64_t now) {
    if (!c->has_data && c->evlen == 0 && !c->has_id) return;   /* blank line, nothing pending */
    c->events++; g.events++;
    if (c->evlen == 3 && memcmp(c->ev, "end", 3) == 0) c->ended = 1;
    if (c->has_id && c->idlen > 0) {
        int isint = 1; int64_t id = 0;
        for (int i = 0; i < c->idlen; i++) {
            if (!isdigit((unsigned char)c->idbuf[i]) || i > 17) { isint = 0; break; }
            id = id * 10 + (c->idbuf[i] - '0');
        }
        if (isint) {
            c->id_is_int = 1;
            if (c->have_last_id) {
                if (id > c->last_id + 1) c->id_gaps += (uint32_t)(id - c->last_id - 1);
                else if (id <= c->last_id) c->id_dups++;
            }
            c->last_id = id; c->have_last_id = 1;
        }
    }
    if (c->has_data && is_ts_event(c)) {
        int64_t ts = parse_ts(c->data, c->dlen);
        if (ts > 0) {
            if (ts >= phase_start_us && phase_start_us > 0) {
                c->ts_events++; g.ts_events++;
                h_add(&lat_hist, now - ts);
                if (g.first_ts_rx == 0) g.first_ts_rx = now;
                g.last_ts_rx = now;
            } else g.stale_ts++;
        }
    }
    c->evlen = 0; c->dlen = 0; c->has_data = 0; c->has_id = 0; c->idlen = 0;
}

static void process_line(conn_t *c, int64_t now) {
    const char *l = c->line; int n = c->llen;
    if (n == 0) { dispatch_event(c, now); return; }
    if (l[0] == ':') { c->comments++; g.comments++; return; }
    int k = 0; while (k < n && l[k] != ':') k++;
    const char *v = l + k; int vn = 0;
    if (k < n) { v = l + k + 1; vn = n - k - 1; if (vn > 0 && v[0] == ' ') { v++; vn--; } }
    if (k == 5 && memcmp(l, "event", 5) == 0) {
        c->evlen = (uint8_t)(vn < EVNAME_CAP ? vn : EVNAME_CAP); memcpy(c->ev, v, c->evlen);
    } else if (k == 4 && memcmp(l, "data", 4) == 0) {
        if (c->has_data && c->dlen < DATA_CAP) c->data[c->dlen++] = '\n';
        int room = DATA_CAP - c->dlen; int m = vn < room ? vn : room;
        memcpy(c->data + c->dlen, v, (size_t)m); c->dlen += (uint16_t)m; c->has_data = 1;
    } else if (k == 2 && memcmp(l, "id", 2) == 0) {
        c->idlen = (uint8_t)(vn < (int)sizeof c->idbuf ? vn : (int)sizeof c->idbuf);
        memcpy(c->idbuf, v, c->idlen); c->has_id = 1;
    } /* retry: and unknown fields are ignored */
}

static void sse_feed(conn_t *c, const char *p, size_t n, int64_t now) {
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (c->cr_pending) { c->cr_pending = 0; if (ch == '\n') continue; }
        if (ch == '\r' || ch == '\n') {
            if (ch == '\r') c->cr_pending = 1;
            process_line(c, now);
            c->llen = 0; c->line_trunc = 0;
            continue;
        }
        if (c->llen < LINE_CAP) c->line[c->llen++] = ch; else c->line_trunc = 1;
    }
}

/* ------------------------------------------------------------------ HTTP responses */
static void body_bytes(conn_t *c, const char *p, size_t n, int64_t now) {
    if (c->kind == K_SUB) { sse_feed(c, p, n, now); return; }
    if (c->bbuf && c->blen < BODY_CAP) {
        size_t m = n < BODY_CAP - c->blen ? n : BODY_CAP - c->blen;
        memcpy(c->bbuf + c->blen, p, m); c->blen += (uint32_t)m;
    }
}

/* Feeds body bytes through the chunked decoder. Returns bytes consumed; sets *done at the end. */
static size_t chunked_feed(conn_t *c, const char *p, size_t n, int64_t now, int *done) {
    size_t i = 0;
    while (i < n) {
        char ch = p[i];
        switch (c->cstate) {
        case C_SIZE:
            if (isxdigit((unsigned char)ch)) {
                int d = isdigit((unsigned char)ch) ? ch - '0' : (tolower((unsigned char)ch) - 'a' + 10);
                if (c->cremain > ((uint64_t)1 << 40)) return (size_t)-1;
                c->cremain = c->cremain * 16 + (uint64_t)d; i++;
            } else if (ch == '\n') {
                c->cstate = c->cremain == 0 ? C_TRAILER_START : C_DATA; i++;
            } else { c->cstate = C_EXT; i++; }
            break;
        case C_EXT:
            if (ch == '\n') c->cstate = c->cremain == 0 ? C_TRAILER_START : C_DATA;
            i++;
            break;
        case C_DATA: {
            size_t m = n - i; if (m > c->cremain) m = (size_t)c->cremain;
            body_bytes(c, p + i, m, now);
            i += m; c->cremain -= m;
            if (c->cremain == 0) c->cstate = C_DATA_END;
            break; }
        case C_DATA_END:
            if (ch == '\n') { c->cstate = C_SIZE; c->cremain = 0; }
            i++;
            break;
        case C_TRAILER_START:
            if (ch == '\n') { c->cstate = C_DONE; *done = 1; return i + 1; }
            if (ch != '\r') c->cstate = C_TRAILER_LINE;
            i++;
            break;
        case C_TRAILER_LINE:
            if (ch == '\n') c->cstate = C_TRAILER_START;
            i++;
            break;
        default:
            *done = 1; return i;
        }
    }
    return i;
}

static void parse_headers(conn_t *c) {
    c->hbuf[c->hlen < HDR_CAP ? c->hlen : HDR_CAP - 1] = 0;
    const char *h = c->hbuf;
    if (strncmp(h, "HTTP/1.", 7) == 0 && strlen(h) >= 12) c->status = atoi(h + 9);
    if (strncmp(h, "HTTP/1.0", 8) == 0) c->conn_close = 1;
    const char *line = strchr(h, '\n');
    int guard = 0;
    while (line && *line && guard++ < 200) {
        line++;
        if (strncasecmp(line, "content-length:", 15) == 0) {
            c->has_clen = 1; c->cremain = strtoull(line + 15, NULL, 10);
        } else if (strncasecmp(line, "transfer-encoding:", 18) == 0) {
            const char *e = strchr(line, '\n'); size_t len = e ? (size_t)(e - line) : strlen(line);
            if (memmem(line, len, "chunked", 7)) c->chunked = 1;
        } else if (strncasecmp(line, "connection:", 11) == 0) {
            const char *e = strchr(line, '\n'); size_t len = e ? (size_t)(e - line) : strlen(line);
            if (memmem(line, len, "close", 5)) c->conn_close = 1;
        }
        line = strchr(line, '\n');
    }
    if (c->chunked) { c->cstate = C_SIZE; c->cremain = 0; c->has_clen = 0; }
}

/* ------------------------------------------------------------------ publishing */
static char pub_host_hdr[64];
static int pub_open_conns;
static long sessions_target;

static void build_request(conn_t *c, int64_t t) {
    char body[512]; int bl = 0;
    const char *method = "POST", *path = opt.pub_path, *extra = "";
    char auth[300] = "";
    switch (opt.mode == M_SESSIONS ? -1 : opt.format) {
    case F_REACTORD:
        bl = snprintf(body, sizeof body, "{\"session\":\"%s\",\"action\":{\"type\":\"alert\",\"message\":\"%" PRId64 "\"}}",
                      opt.session, t);
        break;
    case F_INCREASE:
        bl = snprintf(body, sizeof body, "{\"session\":\"%s\",\"action\":{\"type\":\"increase\"}}", opt.session);
        break;
    case F_NCHAN:
        bl = snprintf(body, sizeof body, "%" PRId64, t);
        break;
    case F_USER:
        method = "PUT";
        bl = snprintf(body, sizeof body, "{\"id\":\"bench\",\"name\":\"%" PRId64 "\"}", t);
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", opt.admin_token ? opt.admin_token : "");
        extra = auth;
        break;
    default: /* sessions */
        path = "/sessions";
        bl = snprintf(body, sizeof body, "{\"reactor\":\"counter\"}");
        break;
    }
    if (!c->req_own) c->req_own = malloc(REQ_CAP);
    int n = snprintf(c->req_own, REQ_CAP,
                     "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s",
                     method, path, pub_host_hdr, extra, bl, body);
    if (n >= REQ_CAP) die("request too long");
    c->req = c->req_own; c->req_len = (uint32_t)n; c->req_off = 0;
}

static int try_write(conn_t *c) {           /* 1 = done, 0 = partial, -1 = error */
    int guard = 0;
    while (c->req_off < c->req_len && guard++ < 64) {
        ssize_t w = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);
        if (w > 0) { c->req_off += (uint32_t)w; continue; }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    return c->req_off >= c->req_len ? 1 : 0;
}

static void pub_send(conn_t *c, int64_t t) {
    build_request(c, t);
    reset_response(c);
    c->sent_us = t;
    g.pub_sent++; g.pub_inflight++;
    int r = try_write(c);
    if (r < 0) { /* connection broke: the response handler path reconnects */
        c->state = S_SENDING; set_events(c, EPOLLOUT); return;
    }
    c->state = r == 1 ? S_HEADERS : S_SENDING;
    set_events(c, r == 1 ? EPOLLIN : EPOLLOUT);
}

/* Reopens a publisher's connection; failed_inflight: a request on it got no answer. */
static void pub_reconnect(conn_t *c, int failed_inflight) {
    if (failed_inflight) { g.pub_err++; g.pub_inflight--; }
    close_conn(c);
    pub_open_conns--;
    if (c->reconnects++ >= MAX_PUB_RECONNECTS) { logf_("publisher gave up after %d reconnects", c->reconnects); return; }
    g.pub_reconnects++;
    if (open_socket(c) == 0) pub_open_conns++;
    else { g.connect_errors++; c->state = S_CLOSED; }
}

static void pub_complete(conn_t *c, int64_t now) {
    g.pub_inflight--;
    if (c->status >= 200 && c->status < 300) {
        g.pub_ok++;
        h_add(&pub_hist, now - c->sent_us);
        if (opt.mode == M_SESSIONS && out_fp) {
            c->bbuf[c->blen < BODY_CAP ? c->blen : BODY_CAP - 1] = 0;
            char *s = strstr(c->bbuf, "\"session\":\"");
            if (s) {
                s += 11; char *e = strchr(s, '"');
                if (e && e - s < 200) { fprintf(out_fp, "%.*s\n", (int)(e - s), s); g.sessions_written++; }
            }
        }
    } else {
        g.pub_err++;
        if (g.pub_err <= 3) logf_("publish answered %d", c->status);
    }
    g.pub_end = now;
    if (c->conn_close) { pub_reconnect(c, 0); return; }
    c->state = S_IDLE;
    set_events(c, EPOLLIN);   /* idle: only to notice a close */
}

/* ------------------------------------------------------------------ subscribers */
static char *sub_requests_single;   /* shared request when path has no %s */
static int sub_req_len_single;

static void sub_start(conn_t *c, long i) {
    (void)i;
    c->events = c->ts_events = c->comments = 0;
    if (open_socket(c) < 0) { g.connect_errors++; g.sub_failed++; c->state = S_CLOSED; return; }
    g.sub_connecting++;
}

static void sub_set_request(conn_t *c, long i) {
    if (!ids) { c->req = sub_requests_single; c->req_len = (uint32_t)sub_req_len_single; c->req_off = 0; return; }
    char path[512];
    snprintf(path, sizeof path, opt.path, ids[i % nids]);
    char *r = malloc(REQ_CAP);
    int n = snprintf(r, REQ_CAP, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n",
                     path, pub_host_hdr);
    c->req_own = r; c->req = r; c->req_len = (uint32_t)n; c->req_off = 0;
}

static void sub_closed(conn_t *c, const char *why) {
    (void)why;
    if (c->state == S_BODY) {
        g.sub_open--;
        if (c->ended) g.sub_ended++; else g.sub_dropped++;
    } else if (c->state != S_CLOSED) {
        g.sub_connecting--; g.sub_failed++;
    }
    close_conn(c);
    free(c->req_own); c->req_own = NULL;
}

/* ------------------------------------------------------------------ I/O */
static void on_readable(conn_t *c, int64_t now);

static void on_writable(conn_t *c) {
    if (c->state == S_CONNECTING) {
        int err = 0; socklen_t el = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            g.connect_errors++;
            if (c->kind == K_SUB) sub_closed(c, "connect");
            else { c->state = S_CLOSED; close_conn(c); pub_open_conns--; }
            return;
        }
        if (c->kind == K_PUB) { c->state = S_IDLE; set_events(c, EPOLLIN); return; }
        c->state = S_SENDING;
        reset_response(c);
    }
    if (c->state == S_SENDING) {
        int r = try_write(c);
        if (r < 0) { if (c->kind == K_SUB) sub_closed(c, "write"); else pub_reconnect(c, 1); return; }
        if (r == 1) { c->state = S_HEADERS; set_events(c, EPOLLIN | EPOLLRDHUP); }
        else set_events(c, EPOLLOUT);
    }
}

/* Handles n bytes read on c. Returns -1 when c was closed. */
static int on_bytes(conn_t *c, const char *p, size_t n, int64_t now) {
    size_t i = 0;
    if (c->state == S_HEADERS) {
        if (!c->hbuf) c->hbuf = malloc(HDR_CAP);
        int end = 0;
        while (i < n) {                         /* the last four bytes roll through hmatch */
            unsigned char ch = (unsigned char)p[i++];
            if (c->hlen < HDR_CAP - 1) c->hbuf[c->hlen++] = (char)ch;
            c->hmatch = (c->hmatch << 8) | ch;
            if (c->hmatch == 0x0d0a0d0aU || (c->hmatch & 0xffffU) == 0x0a0aU) { end = 1; break; }
        }
        if (!end) return 0;
        parse_headers(c);
        free(c->hbuf); c->hbuf = NULL;
        if (c->kind == K_SUB) {
            g.sub_connecting--;
            if (c->status != 200) {
                g.sub_http_err++; g.sub_failed++;
                if (g.sub_http_err <= 3) logf_("subscribe answered %d", c->status);
                c->state = S_CLOSED; close_conn(c); free(c->req_own); c->req_own = NULL;
                return -1;
            }
            c->state = S_BODY; g.sub_open++; g.sub_ready++;
            free(c->req_own); c->req_own = NULL;
        } else {
            c->state = S_BODY;
            if (!c->bbuf && opt.mode == M_SESSIONS) c->bbuf = malloc(BODY_CAP);
            if (!c->chunked && (!c->has_clen || c->cremain == 0)) {
                if (!c->has_clen && c->status != 204 && c->status != 304) c->conn_close = 1; /* body until close: treat as done */
                pub_complete(c, now);
                return 0;
            }
        }
    }
    if (c->state != S_BODY || i >= n) return 0;
    if (c->chunked) {
        int done = 0;
        size_t used = chunked_feed(c, p + i, n - i, now, &done);
        if (used == (size_t)-1) {
            if (c->kind == K_SUB) sub_closed(c, "chunk"); else pub_reconnect(c, 1);
            return -1;
        }
        if (done) {
            if (c->kind == K_SUB) { sub_closed(c, "end"); return -1; }
            pub_complete(c, now);
        }
    } else if (c->kind == K_PUB) {
        size_t m = n - i; if (m > c->cremain) m = (size_t)c->cremain;
        body_bytes(c, p + i, m, now);
        c->cremain -= m;
        if (c->cremain == 0) pub_complete(c, now);
    } else {
        sse_feed(c, p + i, n - i, now);
    }
    return 0;
}

static void on_readable(conn_t *c, int64_t now) {
    for (int k = 0; k < MAX_READS_PER_WAKE; k++) {
        ssize_t r = recv(c->fd, rbuf, sizeof rbuf, 0);
        if (r > 0) {
            g.bytes_rx += (uint64_t)r;
            if (c->kind == K_PUB && (c->state == S_IDLE)) { /* unexpected bytes: resync by reconnecting */
                pub_reconnect(c, 0); return;
            }
            if (on_bytes(c, rbuf, (size_t)r, now) < 0) return;
            if (c->fd < 0) return;
            if ((size_t)r < sizeof rbuf) return;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r < 0 && errno == EINTR) continue;
        /* EOF or error */
        if (c->kind == K_SUB) {
            if (c->state == S_BODY) {
                /* flush a final event without its blank line */
                sse_feed(c, "\n", 1, now);
            }
            sub_closed(c, "eof");
        } else {
            pub_reconnect(c, c->state != S_IDLE);
        }
        return;
    }
}

/* ------------------------------------------------------------------ main loop */
static volatile sig_atomic_t stop_flag;
static void on_signal(int s) { (void)s; stop_flag = 1; }

static void poll_once(int timeout_ms) {
    static struct epoll_event evs[1024];
    int n = epoll_wait(epfd, evs, 1024, timeout_ms);
    if (n <= 0) return;
    int64_t now = now_us();
    for (int i = 0; i < n; i++) {
        conn_t *c = evs[i].data.ptr;
        if (c->fd < 0) continue;
        uint32_t e = evs[i].events;
        if (e & EPOLLOUT) { on_writable(c); if (c->fd < 0) continue; }
        if (e & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
            if (c->state == S_CONNECTING || c->state == S_SENDING) {
                if (e & (EPOLLHUP | EPOLLERR)) on_writable(c);
                continue;
            }
            now = now_us();
            on_readable(c, now);
        }
    }
}

static long next_sub;
static void open_more_subs(void) {
    int guard = 0;
    while (next_sub < opt.subs && g.sub_connecting < opt.connect_parallel && guard++ < 4096) {
        conn_t *c = &conns[next_sub];
        sub_set_request(c, next_sub);
        sub_start(c, next_sub);
        next_sub++;
    }
}

static void touch(const char *path, const char *text) {
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static double cpu_seconds(double *user, double *sys) {
    struct rusage ru; getrusage(RUSAGE_SELF, &ru);
    *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    return *user + *sys;
}

static void usage(void) {
    fputs(
"usage: sseload MODE --port P [options]\n"
"modes: sub | pub | pubsub | idle | sessions\n"
"  -p, --port P            target 127.0.0.1:P (required)\n"
"      --pub-port P        publish to 127.0.0.1:P instead (another node of a cluster)\n"
"  -n, --subs N            subscribers (sub, pubsub, idle)\n"
"      --path PATH         subscribe path, e.g. /sessions/ID/events or /sub/NAME; a %s takes\n"
"                          ids from --ids-file round robin (subscriber i gets id i mod count)\n"
"      --ids-file F        one id a line\n"
"  -f, --format F          reactord | nchan | user | increase (publish body and timestamp place)\n"
"      --session ID        reactord session for /action\n"
"      --pub-path P        default /action, /pub/bench (nchan), /user (user)\n"
"  -r, --rate R            publishes per second, 0 = as fast as possible (default 0)\n"
"  -k, --pub-conns K       keep-alive publish connections (default 1)\n"
"  -d, --duration S        publish phase (pub, pubsub) or hold time (sub, idle); default 5\n"
"  -c, --count M           stop publishing after M publishes (0 = by duration; sessions: how many)\n"
"      --drain S           pubsub: wait up to S s for deliveries after publishing (default 10)\n"
"      --settle S          pubsub: pause between all-subscribed and publishing (default 0.2)\n"
"      --connect-timeout S give up opening subscribers after S s (default 60)\n"
"      --connect-parallel C  subscribers being opened at once (default 256)\n"
"      --admin-token T     for --format user\n"
"      --ts-event NAME     SSE event type carrying timestamps (pulse|state|message|any)\n"
"      --ts-key KEY        the timestamp is the string value of JSON key KEY in the data\n"
"                          (default: value for reactord, name for user, none: whole data, nchan)\n"
"      --ready-file F      written when every subscriber is open (idle, sub)\n"
"      --out F             sessions: where the ids go (default stdout)\n"
"      --batch-us U        pause U us after each epoll round (fewer, larger reads: less client\n"
"                          CPU per event, up to U us more latency; for throughput runs only)\n"
"      --rst-at-exit       close every connection with RST (SO_LINGER 0) at exit, not FIN\n"
"  -q, --quiet\n", stderr);
    exit(2);
}

static char **read_ids(const char *path, long *n) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open %s", path);
    long cap = 1024, k = 0; char **v = malloc(sizeof(char *) * (size_t)cap);
    char line[512];
    while (fgets(line, sizeof line, f) && k < 10000000) {
        size_t l = strcspn(line, "\r\n"); line[l] = 0;
        if (l == 0) continue;
        if (k == cap) { cap *= 2; v = realloc(v, sizeof(char *) * (size_t)cap); }
        v[k++] = strdup(line);
    }
    fclose(f);
    *n = k;
    return v;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *m = argv[1];
    if (!strcmp(m, "sub")) opt.mode = M_SUB;
    else if (!strcmp(m, "pub")) opt.mode = M_PUB;
    else if (!strcmp(m, "pubsub")) opt.mode = M_PUBSUB;
    else if (!strcmp(m, "idle")) opt.mode = M_IDLE;
    else if (!strcmp(m, "sessions")) opt.mode = M_SESSIONS;
    else usage();
    const char *fmt = "reactord";
    static struct option lo[] = {
        {"port", 1, 0, 'p'}, {"pub-port", 1, 0, 'Q'}, {"subs", 1, 0, 'n'}, {"path", 1, 0, 'P'}, {"ids-file", 1, 0, 'I'},
        {"format", 1, 0, 'f'}, {"session", 1, 0, 's'}, {"pub-path", 1, 0, 'U'}, {"rate", 1, 0, 'r'},
        {"pub-conns", 1, 0, 'k'}, {"duration", 1, 0, 'd'}, {"count", 1, 0, 'c'}, {"drain", 1, 0, 'D'},
        {"settle", 1, 0, 'S'}, {"connect-timeout", 1, 0, 'T'}, {"connect-parallel", 1, 0, 'C'},
        {"admin-token", 1, 0, 'a'}, {"ts-event", 1, 0, 'e'}, {"ts-key", 1, 0, 'K'}, {"ready-file", 1, 0, 'R'},
        {"out", 1, 0, 'o'}, {"batch-us", 1, 0, 'B'}, {"rst-at-exit", 0, 0, 'X'}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int ch;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "p:n:f:s:r:k:d:c:qh", lo, NULL)) != -1) {
        switch (ch) {
        case 'p': opt.port = atoi(optarg); break;
        case 'Q': opt.pub_port = atoi(optarg); break;
        case 'n': opt.subs = atol(optarg); break;
        case 'P': opt.path = optarg; break;
        case 'I': opt.ids_file = optarg; break;
        case 'f': fmt = optarg; break;
        case 's': opt.session = optarg; break;
        case 'U': opt.pub_path = optarg; break;
        case 'r': opt.rate = atof(optarg); break;
        case 'k': opt.pub_conns = atoi(optarg); break;
        case 'd': opt.duration = atof(optarg); break;
        case 'c': opt.count = atol(optarg); break;
        case 'D': opt.drain = atof(optarg); break;
        case 'S': opt.settle = atof(optarg); break;
        case 'T': opt.connect_timeout = atof(optarg); break;
        case 'C': opt.connect_parallel = atoi(optarg); break;
        case 'a': opt.admin_token = optarg; break;
        case 'e': opt.ts_event = optarg; break;
        case 'K': opt.ts_key = optarg; break;
        case 'R': opt.ready_file = optarg; break;
        case 'o': opt.out = optarg; break;
        case 'X': opt.rst_at_exit = 1; break;
        case 'B': opt.batch_us = atoi(optarg); if (opt.batch_us < 0 || opt.batch_us > 100000) die("--batch-us 0..100000"); break;
        case 'q': opt.quiet = 1; break;
        default: usage();
        }
    }
    if (opt.port <= 0 || opt.port > 65535) die("--port is required");
    if (!strcmp(fmt, "reactord")) opt.format = F_REACTORD;
    else if (!strcmp(fmt, "nchan")) opt.format = F_NCHAN;
    else if (!strcmp(fmt, "user")) opt.format = F_USER;
    else if (!strcmp(fmt, "increase")) opt.format = F_INCREASE;
    else die("unknown --format %s", fmt);
    if (!opt.pub_path) opt.pub_path = opt.format == F_NCHAN ? "/pub/bench" : opt.format == F_USER ? "/user" : "/action";
    if (!opt.ts_event) opt.ts_event = opt.format == F_NCHAN ? "message" : opt.format == F_USER ? "state" : "pulse";
    ts_event_any = !strcmp(opt.ts_event, "any");
    ts_event_name = !strcmp(opt.ts_event, "message") ? "" : opt.ts_event;
    {   /* where the timestamp sits: after "value":" (pulse), "name":" (user), anywhere (nchan) */
        static char keybuf[80];
        const char *k = opt.ts_key ? opt.ts_key : opt.format == F_USER ? "name" : opt.format == F_NCHAN ? "" : "value";
        if (strlen(k) > 60) die("--ts-key too long");
        if (*k) { snprintf(keybuf, sizeof keybuf, "\"%s\":\"", k); ts_key = keybuf; ts_key_len = strlen(keybuf); }
    }
    int publishes = opt.mode == M_PUB || opt.mode == M_PUBSUB || opt.mode == M_SESSIONS;
    int subscribes = opt.mode == M_SUB || opt.mode == M_PUBSUB || opt.mode == M_IDLE;
    if (publishes && opt.mode != M_SESSIONS && (opt.format == F_REACTORD || opt.format == F_INCREASE) && !opt.session)
        die("--session is required for --format %s", fmt);
    if (publishes && opt.format == F_USER && !opt.admin_token && opt.mode != M_SESSIONS) die("--admin-token is required for --format user");
    if (subscribes && !opt.path) die("--path is required");
    if (subscribes && (opt.subs <= 0)) die("--subs must be > 0");
    if (opt.mode == M_SESSIONS && opt.count <= 0) die("sessions needs --count");
    if (opt.pub_conns < 1) opt.pub_conns = 1;
    if (opt.pub_conns > 1024) opt.pub_conns = 1024;
    if (opt.connect_parallel < 1) opt.connect_parallel = 1;
    if (opt.duration < 0 || opt.duration > 86400) die("--duration out of range");
    if (opt.drain < 0 || opt.drain > 3600) die("--drain out of range");
    if (!publishes) opt.pub_conns = 0;
    if (!subscribes) opt.subs = 0;
    if (opt.subs + opt.pub_conns > MAX_CONNS) die("too many connections (max %d)", MAX_CONNS);
    if (opt.ids_file) {
        ids = read_ids(opt.ids_file, &nids);
        if (nids == 0) die("no ids in %s", opt.ids_file);
        if (!opt.path || !strstr(opt.path, "%s")) die("--ids-file needs a --path with %%s");
    } else if (opt.path && strstr(opt.path, "%")) die("--path has %% but no --ids-file");

    /* raise the descriptor limit to the hard limit */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if ((long)rl.rlim_cur < opt.subs + opt.pub_conns + 16)
            logf_("warning: RLIMIT_NOFILE %ld < %ld connections", (long)rl.rlim_cur, opt.subs + opt.pub_conns);
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal); signal(SIGTERM, on_signal);

    memset(&target, 0, sizeof target);
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)opt.port);
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);     /* 127.0.0.1, always */
    if (opt.pub_port <= 0) opt.pub_port = opt.port;
    if (opt.pub_port > 65535) die("--pub-port out of range");
    pub_target = target;
    pub_target.sin_port = htons((uint16_t)opt.pub_port);
    snprintf(pub_host_hdr, sizeof pub_host_hdr, "127.0.0.1:%d", opt.pub_port);

    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1: %s", strerror(errno));
    long total = opt.subs + opt.pub_conns;
    conns = calloc((size_t)(total > 0 ? total : 1), sizeof(conn_t));
    if (!conns) die("out of memory");
    for (long i = 0; i < total; i++) { conns[i].fd = -1; conns[i].kind = i < opt.subs ? K_SUB : K_PUB; conns[i].state = S_FREE; }
    if (!ids && opt.path) {
        sub_requests_single = malloc(REQ_CAP);
        sub_req_len_single = snprintf(sub_requests_single, REQ_CAP,
            "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n", opt.path, pub_host_hdr);
    }
    if (opt.mode == M_SESSIONS) {
        out_fp = opt.out ? fopen(opt.out, "w") : stdout;
        if (!out_fp) die("cannot write %s", opt.out);
        sessions_target = opt.count;
    }

    double cu0, cs0; double cpu0 = cpu_seconds(&cu0, &cs0);
    int64_t t0 = now_us();

    /* ---- phase 1: subscribers ---- */
    int64_t connect_deadline = t0 + (int64_t)(opt.connect_timeout * 1e6);
    if (subscribes) {
        long rounds = 0;
        while (!stop_flag && now_us() < connect_deadline && rounds++ < 100000000L) {
            open_more_subs();
            if (next_sub >= opt.subs && g.sub_connecting == 0) break;
            poll_once(10);
        }
        logf_("subscribers open=%ld failed=%ld in %.2f s", g.sub_open, g.sub_failed, (now_us() - t0) / 1e6);
    }
    int64_t t_subscribed = now_us();
    double connect_s = (t_subscribed - t0) / 1e6;

    /* publishers connect now */
    for (long i = opt.subs; i < total; i++) {
        if (open_socket(&conns[i]) == 0) pub_open_conns++; else g.connect_errors++;
    }
    if (publishes) {   /* wait (bounded) until the publishers are connected */
        int64_t until = now_us() + 5000000;
        while (!stop_flag && now_us() < until) {
            int ready = 0;
            for (long i = opt.subs; i < total; i++) if (conns[i].state == S_IDLE) ready++;
            if (ready == pub_open_conns) break;
            poll_once(5);
        }
    }
    if (opt.mode == M_PUBSUB && opt.settle > 0) {
        int64_t until = now_us() + (int64_t)(opt.settle * 1e6);
        while (!stop_flag && now_us() < until) poll_once(5);
    }
    touch(opt.ready_file, "ready\n");

    /* ---- phase 2: publish / hold ---- */
    phase_start_us = now_us();
    g.pub_start = phase_start_us;
    int64_t phase_end = phase_start_us + (int64_t)(opt.duration * 1e6);
    long max_pubs = opt.mode == M_SESSIONS ? sessions_target : (opt.count > 0 ? opt.count : -1);
    if (opt.mode == M_SESSIONS) phase_end = phase_start_us + (int64_t)3600e6;   /* bounded by count; 1 h cap */
    long rounds = 0;
    int64_t last_progress = phase_start_us;
    while (!stop_flag && rounds++ < 1000000000L) {
        int64_t now = now_us();
        if (now >= phase_end) break;
        if (publishes) {
            int done_count = max_pubs >= 0 && g.pub_sent >= max_pubs;
            if (done_count && g.pub_inflight == 0) break;
            if (!done_count) {
                long due = opt.rate > 0 ? (long)((double)(now - phase_start_us) * opt.rate / 1e6) + 1 : -1;
                for (long i = opt.subs; i < total; i++) {
                    conn_t *c = &conns[i];
                    if (c->state != S_IDLE) continue;
                    if (max_pubs >= 0 && g.pub_sent >= max_pubs) break;
                    if (due >= 0 && g.pub_sent >= due) break;
                    pub_send(c, now_us());
                }
            }
            if (pub_open_conns <= 0 && g.pub_inflight == 0) { logf_("no publisher connection left"); break; }
        }
        int timeout = 10;
        if (publishes && opt.rate > 0) {
            int64_t next_due = phase_start_us + (int64_t)((double)g.pub_sent * 1e6 / opt.rate);
            int64_t wait = (next_due - now_us()) / 1000;
            timeout = wait < 0 ? 0 : wait > 10 ? 10 : (int)wait;
        } else if (publishes) timeout = 1;
        poll_once(timeout);
        if (opt.batch_us > 0) usleep((useconds_t)opt.batch_us);
        if (!opt.quiet && now - last_progress >= 5000000) {
            last_progress = now;
            logf_("t=%.0fs published=%ld ok=%ld deliveries=%ld open=%ld dropped=%ld",
                  (now - phase_start_us) / 1e6, g.pub_sent, g.pub_ok, g.ts_events, g.sub_open, g.sub_dropped);
        }
    }
    int64_t publish_end = now_us();

    /* ---- phase 3: drain (pubsub): in-flight publishes and deliveries ---- */
    if (publishes) {
        int64_t until = now_us() + (int64_t)((opt.mode == M_PUBSUB ? opt.drain : 5) * 1e6);
        long guard = 0;
        while (!stop_flag && now_us() < until && guard++ < 100000000L) {
            int pubs_done = g.pub_inflight <= 0;
            int subs_done = opt.mode != M_PUBSUB || g.ts_events >= g.pub_ok * g.sub_open;
            if (pubs_done && subs_done) break;
            poll_once(5);
            if (opt.batch_us > 0) usleep((useconds_t)opt.batch_us);
        }
    }
    int64_t t_end = now_us();
    double cu1, cs1; double cpu1 = cpu_seconds(&cu1, &cs1);

    /* ---- report ---- */
    long lost = 0, dups = 0, complete = 0, id_gaps = 0, id_dups = 0, hb_min = -1, hb_max = 0;
    long ev_min = -1, open_end = 0;
    for (long i = 0; i < opt.subs; i++) {
        conn_t *c = &conns[i];
        id_gaps += c->id_gaps; id_dups += c->id_dups;
        if (c->state != S_BODY) continue;
        open_end++;
        if (hb_min < 0 || (long)c->comments < hb_min) hb_min = c->comments;
        if ((long)c->comments > hb_max) hb_max = c->comments;
        if (ev_min < 0 || (long)c->events < ev_min) ev_min = c->events;
        if (opt.mode == M_PUBSUB) {
            long want = g.pub_ok, got = c->ts_events;
            if (got < want) lost += want - got; else dups += got - want;
            if (got == want) complete++;
        }
    }
    double pub_s = (publish_end - phase_start_us) / 1e6;
    double wall = (t_end - t0) / 1e6;
    double cpu = cpu1 - cpu0;
    double deliver_window = (g.last_ts_rx > 0 ? (g.last_ts_rx - phase_start_us) : 0) / 1e6;
    printf("result mode=%s format=%s subs=%ld open=%ld open_end=%ld connect_s=%.2f failed=%ld http_err=%ld dropped=%ld ended=%ld",
           m, publishes ? fmt : "-", opt.subs, g.sub_ready, open_end, connect_s, g.sub_failed, g.sub_http_err, g.sub_dropped, g.sub_ended);
    if (publishes)
        printf(" published=%ld pub_ok=%ld pub_err=%ld pub_s=%.3f pub_per_s=%.1f pub_p50_us=%" PRIu64 " pub_p99_us=%" PRIu64 " pub_max_us=%" PRIu64,
               g.pub_sent, g.pub_ok, g.pub_err, pub_s, pub_s > 0 ? g.pub_ok / pub_s : 0,
               h_pct(&pub_hist, 50), h_pct(&pub_hist, 99), pub_hist.max);
    if (subscribes)
        printf(" events=%ld events_per_s=%.1f deliveries=%ld deliver_s=%.3f deliveries_per_s=%.1f lost=%ld dup=%ld complete=%ld id_gaps=%ld id_dups=%ld stale=%ld"
               " heartbeats=%ld hb_min=%ld hb_max=%ld ev_min=%ld"
               " p50_us=%" PRIu64 " p90_us=%" PRIu64 " p99_us=%" PRIu64 " p999_us=%" PRIu64 " max_us=%" PRIu64,
               g.events, deliver_window > 0 ? g.events / deliver_window : 0, g.ts_events, deliver_window, deliver_window > 0 ? g.ts_events / deliver_window : 0,
               lost, dups, complete, id_gaps, id_dups, g.stale_ts, g.comments, hb_min < 0 ? 0 : hb_min, hb_max, ev_min < 0 ? 0 : ev_min,
               h_pct(&lat_hist, 50), h_pct(&lat_hist, 90), h_pct(&lat_hist, 99), h_pct(&lat_hist, 99.9), lat_hist.max);
    if (opt.mode == M_SESSIONS) printf(" sessions=%ld", g.sessions_written);
    printf(" connect_errors=%ld rx_mb=%.1f wall_s=%.2f cpu_user_s=%.2f cpu_sys_s=%.2f cpu_pct=%.1f\n",
           g.connect_errors, g.bytes_rx / 1e6, wall, cu1 - cu0, cs1 - cs0, wall > 0 ? 100.0 * cpu / wall : 0);
    fflush(stdout);
    if (out_fp && out_fp != stdout) fclose(out_fp);
    if (opt.rst_at_exit) {
        struct linger lg = { .l_onoff = 1, .l_linger = 0 };
        for (long i = 0; i < total; i++)
            if (conns[i].fd >= 0) setsockopt(conns[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    /* sockets close at exit (all at once: FIN, or RST with --rst-at-exit) */
    return 0;
}
