// What kind of store a `controller.store` value names. Header-only, so that configuration
// readers (gpool_controller_config, the config fuzzer) decide it without linking the store.
#pragma once

#include <string>

namespace gpool::store {

// True when `store` names a PostgreSQL database (a postgresql:// URI or a libpq key=value
// string) rather than a SQLite file. Pure; thread-safe.
inline bool isPostgresStore(const std::string& store) {
  return store.rfind("postgresql://", 0) == 0 || store.rfind("postgres://", 0) == 0 ||
         store.find('=') != std::string::npos;
}

}  // namespace gpool::store
