#ifndef CLIBPQ_SHIM_H
#define CLIBPQ_SHIM_H
// libpq, PostgreSQL's own client library, seen from Swift; nothing else lives here.
#include <libpq-fe.h>

#endif
