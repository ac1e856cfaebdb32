#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "net/router.h"

// The dashboard's static files (web/ in the source tree, <prefix>/share/gpool/web installed):
// GET / answers index.html and GET /web/{file} any other file of that one folder. The page then
// talks to the public REST API (/v1/...) only. docs/dashboard.md.
namespace gpool::controller {

// Adds GET / and GET /web/{file}, anonymous (the files hold no data; the page asks for a token
// before it calls the API). Files are read at each request, so that an upgrade of the files
// needs no restart. A file name must be letters, digits, '.', '-' or '_', not start with '.',
// and name a regular file directly inside `web_root` (no sub-folders, no symbolic link leaving
// it): anything else is a 404, so no request can read outside the folder. `web_root` is copied.
// kAlreadyExists if the router already has these routes.
Status addWebRoutes(net::Router& router, std::string web_root);

// The Content-Type for a file name by its extension (text/html; charset=utf-8,
// text/javascript; charset=utf-8, text/css; charset=utf-8, image/svg+xml, ...);
// application/octet-stream for an unknown one.
std::string_view webContentType(std::string_view file_name);

// Where the dashboard's files are when controller.web_root is not set: <dir of this
// executable>/../share/gpool/web (the package), /usr/share/gpool/web, then the source tree's web/
// (a build-tree gpoold); the first folder holding index.html. Empty if none does.
std::string findWebRoot();

}  // namespace gpool::controller
