#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
// libsqlite3, seen from Swift. SQLITE_TRANSIENT is a macro casting -1 to a function pointer,
// which Swift cannot import: these wrappers bind with it; nothing else lives here.
#include <sqlite3.h>

/// Binds a copy of `count` bytes of UTF-8 text.
static inline int
sqlite_shim_bind_text (sqlite3_stmt *statement, int index, const char *text, int count)
{
  return sqlite3_bind_text (statement, index, text, count, SQLITE_TRANSIENT);
}

/// Binds a copy of `count` bytes.
static inline int
sqlite_shim_bind_blob (sqlite3_stmt *statement, int index, const void *bytes, int count)
{
  return sqlite3_bind_blob (statement, index, bytes, count, SQLITE_TRANSIENT);
}

#endif
