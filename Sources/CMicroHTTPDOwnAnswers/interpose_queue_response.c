#define _GNU_SOURCE
#include "own_answers.h"

#if MHD_VERSION == 0x00097500

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>

typedef enum MHD_Result (*queue_function) (struct MHD_Connection *, unsigned int, struct MHD_Response *);
typedef enum MHD_Result (*lookup_function) (struct MHD_Connection *, enum MHD_ValueKind, const char *, size_t,
                                            const char **, size_t *);

static queue_function libmicrohttpd_queue;
static lookup_function libmicrohttpd_lookup;
/// libmicrohttpd's code, [start, end): the calls to tell apart from the application's.
static uintptr_t libmicrohttpd_start, libmicrohttpd_end;
static pthread_once_t found_once = PTHREAD_ONCE_INIT;
static _Atomic (mhd_own_answers_handler) installed_handler;

static int
find_code_segment (struct dl_phdr_info *info, size_t size, void *data)
{
  (void) size;
  uintptr_t probe = (uintptr_t) data;
  for (ElfW (Half) index = 0; index < info->dlpi_phnum; index++)
  {
    const ElfW (Phdr) *segment = &info->dlpi_phdr[index];
    if (PT_LOAD != segment->p_type || 0 == (segment->p_flags & PF_X)) continue;
    uintptr_t start = info->dlpi_addr + segment->p_vaddr;
    if (probe >= start && probe < start + segment->p_memsz)
    {
      libmicrohttpd_start = start;
      libmicrohttpd_end = start + segment->p_memsz;
      return 1;
    }
  }
  return 0;
}

static void
find_libmicrohttpd (void)
{
  // The next definition after this one in the lookup order: libmicrohttpd's.
  libmicrohttpd_queue = (queue_function) dlsym (RTLD_NEXT, "MHD_queue_response");
  libmicrohttpd_lookup = (lookup_function) dlsym (RTLD_NEXT, "MHD_lookup_connection_value_n");
  if (NULL != libmicrohttpd_queue)
    dl_iterate_phdr (find_code_segment, (void *) (uintptr_t) libmicrohttpd_queue);
}

int
mhd_own_answers_install (mhd_own_answers_handler handler)
{
  atomic_store (&installed_handler, handler);
  return 1;
}

/// Interposes libmicrohttpd's own. `__builtin_return_address` tells libmicrohttpd's calls (its
/// own answers) from the application's, which pass straight on.
enum MHD_Result
MHD_queue_response (struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response)
{
  uintptr_t caller = (uintptr_t) __builtin_return_address (0);
  pthread_once (&found_once, find_libmicrohttpd);
  if (NULL == libmicrohttpd_queue)
    return MHD_NO;
  mhd_own_answers_handler handler = atomic_load (&installed_handler);
  struct MHD_Response *replacement = NULL;
  unsigned int answered = status;
  if (NULL != handler && caller >= libmicrohttpd_start && caller < libmicrohttpd_end
      && NULL != connection && NULL != response)
    replacement = handler (connection, &answered);
  if (NULL == replacement)
    return libmicrohttpd_queue (connection, status, response);
  // The connection holds its own reference once queued; libmicrohttpd's caller destroys its
  // response, which was never queued, as it would after queueing it.
  enum MHD_Result queued = libmicrohttpd_queue (connection, answered, replacement);
  MHD_destroy_response (replacement);
  return queued;
}

/// What libmicrohttpd reads as a Content-Length: one or more decimal digits within 64 bits.
static int
is_readable_length (const char *value, size_t size)
{
  uint64_t number = 0;
  if (NULL == value || 0 == size) return 0;
  for (size_t index = 0; index < size; index++)
  {
    unsigned digit = (unsigned) (unsigned char) value[index] - '0';
    if (digit > 9 || number > (UINT64_MAX - digit) / 10) return 0;
    number = number * 10 + digit;
  }
  return 1;
}

/// Interposes libmicrohttpd's own. Two fields libmicrohttpd refuses in
/// parse_connection_headers, whose caller then overwrites the state that answer left and
/// builds the answer's head a second time (the client reads that copy as the body): a
/// Content-Length it cannot read, and a Cookie it has no room left to copy and split. So, once
/// a handler is installed, lookups from inside libmicrohttpd (MHD_lookup_connection_value's
/// too) do not find such a Content-Length, nor any Cookie: the request reaches MicroHTTP's
/// first call as one without a body, and MicroHTTP, which reads the fields without this
/// function, answers it (400 or 413) and closes (RequestHandling.swift's
/// `contentLengthProblem`, the same test as here). Cookies are passed on as the header field
/// they are; nothing reads libmicrohttpd's split of them, which took room in the connection's
/// pool (a copy, and a record per cookie).
enum MHD_Result
MHD_lookup_connection_value_n (struct MHD_Connection *connection, enum MHD_ValueKind kind, const char *key,
                               size_t key_size, const char **value_ptr, size_t *value_size_ptr)
{
  uintptr_t caller = (uintptr_t) __builtin_return_address (0);
  pthread_once (&found_once, find_libmicrohttpd);
  if (NULL == libmicrohttpd_lookup)
    return MHD_NO;
  if (NULL == atomic_load (&installed_handler) || caller < libmicrohttpd_start || caller >= libmicrohttpd_end
      || MHD_HEADER_KIND != kind || NULL == key)
    return libmicrohttpd_lookup (connection, kind, key, key_size, value_ptr, value_size_ptr);
  if (6 == key_size && 0 == strncasecmp (key, "Cookie", 6))
    return MHD_NO;
  if (14 != key_size || 0 != strncasecmp (key, "Content-Length", 14))
    return libmicrohttpd_lookup (connection, kind, key, key_size, value_ptr, value_size_ptr);
  const char *value = NULL;
  size_t size = 0;
  if (MHD_NO == libmicrohttpd_lookup (connection, kind, key, key_size, &value, &size)
      || !is_readable_length (value, size))
    return MHD_NO;
  if (NULL != value_ptr) *value_ptr = value;
  if (NULL != value_size_ptr) *value_size_ptr = size;
  return MHD_YES;
}

#else

int
mhd_own_answers_install (mhd_own_answers_handler handler)
{
  (void) handler;
  return 0;
}

#endif
