/* The C reference for Benchmarks/http-bench.sh: GET /hello -> {"hello":"world"} written
 * directly against libmicrohttpd, with the daemon set up as MicroHTTP sets it up (epoll
 * internal thread, suspend/resume allowed, same limits) and the same per-request work:
 * answer on the final call of the access handler (keep-alive), a response copied from a
 * buffer, a Content-Type header; 404 for anything else.
 * Usage: reference PORT [THREADS]. Runs until SIGINT/SIGTERM. */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char body[] = "{\"hello\":\"world\"}";
static int first_call_marker;

static enum MHD_Result
handler (void *cls, struct MHD_Connection *connection, const char *url, const char *method,
         const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
  (void) cls; (void) version; (void) upload_data;
  if (NULL == *con_cls) {          /* first call: headers only */
    *con_cls = &first_call_marker;
    return MHD_YES;
  }
  if (0 != *upload_data_size) {    /* a piece of a body: drop it */
    *upload_data_size = 0;
    return MHD_YES;
  }
  int found = (0 == strcmp (method, "GET")) && (0 == strcmp (url, "/hello"));
  const char *text = found ? body : "{\"status\":404}";
  struct MHD_Response *response =
    MHD_create_response_from_buffer (strlen (text), (void *) text, MHD_RESPMEM_MUST_COPY);
  if (NULL == response) return MHD_NO;
  MHD_add_response_header (response, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response (connection, found ? 200 : 404, response);
  MHD_destroy_response (response);
  return ret;
}

static void
completed (void *cls, struct MHD_Connection *connection, void **con_cls,
           enum MHD_RequestTerminationCode toe)
{
  (void) cls; (void) connection; (void) toe;
  *con_cls = NULL;
}

int
main (int argc, char **argv)
{
  unsigned int port = argc > 1 ? (unsigned int) atoi (argv[1]) : 8080;
  unsigned int threads = argc > 2 ? (unsigned int) atoi (argv[2]) : 1;
  struct sockaddr_in address;
  memset (&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons ((uint16_t) port);
  address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);

  struct MHD_OptionItem options[] = {
    { MHD_OPTION_SOCK_ADDR, 0, &address },
    { MHD_OPTION_CONNECTION_LIMIT, 10000, NULL },
    { MHD_OPTION_CONNECTION_TIMEOUT, 30, NULL },
    { MHD_OPTION_CONNECTION_MEMORY_LIMIT, 16 * 1024, NULL },
    { MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096, NULL },
    { threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL },
    { MHD_OPTION_END, 0, NULL },
  };
  struct MHD_Daemon *daemon =
    MHD_start_daemon (MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                      (uint16_t) port, NULL, NULL, handler, NULL,
                      MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                      MHD_OPTION_ARRAY, options, MHD_OPTION_END);
  if (NULL == daemon) {
    fprintf (stderr, "reference: cannot start on 127.0.0.1:%u\n", port);
    return 1;
  }
  printf ("reference listening on 127.0.0.1:%u\n", port);
  fflush (stdout);

  sigset_t signals;
  int received;
  sigemptyset (&signals);
  sigaddset (&signals, SIGINT);
  sigaddset (&signals, SIGTERM);
  pthread_sigmask (SIG_BLOCK, &signals, NULL);
  sigwait (&signals, &received);
  MHD_stop_daemon (daemon);
  return 0;
}
