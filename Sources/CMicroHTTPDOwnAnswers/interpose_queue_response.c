#define _GNU_SOURCE
#include "own_answers.h"

#if MHD_VERSION == 0x00097500

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum MHD_Result (*queue_function) (struct MHD_Connection *, unsigned int, struct MHD_Response *);

static queue_function libmicrohttpd_queue;
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
  if (NULL != handler && caller >= libmicrohttpd_start && caller < libmicrohttpd_end
      && NULL != connection && NULL != response)
    replacement = handler (connection, status);
  if (NULL == replacement)
    return libmicrohttpd_queue (connection, status, response);
  // The connection holds its own reference once queued; libmicrohttpd's caller destroys its
  // response, which was never queued, as it would after queueing it.
  enum MHD_Result queued = libmicrohttpd_queue (connection, status, replacement);
  MHD_destroy_response (replacement);
  return queued;
}

#else

int
mhd_own_answers_install (mhd_own_answers_handler handler)
{
  (void) handler;
  return 0;
}

#endif
