// The dashboard's static file routes (web_routes.h) through the router, over a temporary
// web_root holding files, a sub-folder, a hidden file and a symbolic link that points outside.
#include "controller/web_routes.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "controller/controller_fixture.h"

namespace gpool::controller {
namespace {

namespace fs = std::filesystem;

class WebRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/web";
    fs::create_directories(root_ + "/sub");
    std::ofstream(root_ + "/index.html") << "<!doctype html><title>t</title>";
    std::ofstream(root_ + "/app.js") << "export const x = 1;";
    std::ofstream(root_ + "/style.css") << "body{}";
    std::ofstream(root_ + "/logo.svg") << "<svg/>";
    std::ofstream(root_ + "/data.bin") << "x";
    std::ofstream(root_ + "/.hidden.js") << "secret";
    std::ofstream(root_ + "/sub/inner.js") << "inner";
    std::ofstream(dir_.path() + "/outside.js") << "outside";
    fs::create_symlink(dir_.path() + "/outside.js", root_ + "/link.js");
    ASSERT_TRUE(addWebRoutes(router_, root_).isOk());
  }

  // What GET `path` answers: the route's handler, or the router's 404 when no route matches.
  net::Response get(const std::string& path) {
    net::Router::Match m = router_.match(net::Method::kGet, path, false);
    if (m.kind != net::Router::Match::Kind::kFound) {
      return net::Response::error(404, "not_found", "no route");
    }
    EXPECT_TRUE(m.route->options.allow_anonymous) << path;
    net::Request req;
    req.path = path;
    req.path_params = m.params;
    return m.route->handler(req);
  }

  testing::TempDir dir_;
  std::string root_;
  net::Router router_;
};

TEST_F(WebRoutesTest, ServesTheFilesWithTheirContentTypes) {
  net::Response index = get("/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html><title>t</title>");
  EXPECT_EQ(index.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(index.header("Content-Security-Policy").has_value());
  EXPECT_EQ(get("/web/index.html").body, index.body);
  net::Response app = get("/web/app.js");
  EXPECT_EQ(app.status, 200);
  EXPECT_EQ(app.body, "export const x = 1;");
  EXPECT_EQ(app.header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(app.header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(get("/web/style.css").header("Content-Type"), "text/css; charset=utf-8");
  EXPECT_EQ(get("/web/logo.svg").header("Content-Type"), "image/svg+xml");
  EXPECT_EQ(get("/web/data.bin").header("Content-Type"), "application/octet-stream");
  EXPECT_EQ(webContentType("a.mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(webContentType("noextension"), "application/octet-stream");
}

TEST_F(WebRoutesTest, AnswersNotFoundForAnythingElse) {
  EXPECT_EQ(get("/web/missing.js").status, 404);
  EXPECT_EQ(get("/web/.hidden.js").status, 404);    // hidden files
  EXPECT_EQ(get("/web/sub").status, 404);           // a folder
  EXPECT_EQ(get("/web/sub/inner.js").status, 404);  // no sub-folders
  EXPECT_EQ(get("/web/link.js").status, 404);       // a link that leaves web_root
  EXPECT_EQ(get("/web/..").status, 404);
  EXPECT_EQ(get("/web/../outside.js").status, 404);
  EXPECT_EQ(get("/web/a%2Fb.js").status, 404);
  // A handler given a traversal directly (as if a router let one through) refuses it too.
  net::Router::Match m = router_.match(net::Method::kGet, "/web/x.js", false);
  ASSERT_EQ(m.kind, net::Router::Match::Kind::kFound);
  for (const char* name : {"../outside.js", "..", "sub/inner.js", "/etc/passwd", ""}) {
    net::Request req;
    req.path_params["file"] = name;
    EXPECT_EQ(m.route->handler(req).status, 404) << name;
  }
}

TEST_F(WebRoutesTest, AMissingWebRootAnswersNotFound) {
  net::Router router;
  ASSERT_TRUE(addWebRoutes(router, dir_.path() + "/none").isOk());
  net::Router::Match m = router.match(net::Method::kGet, "/", false);
  ASSERT_EQ(m.kind, net::Router::Match::Kind::kFound);
  EXPECT_EQ(m.route->handler(net::Request{}).status, 404);
  EXPECT_EQ(addWebRoutes(router, "/x").code(), StatusCode::kAlreadyExists);
}

TEST(FindWebRootTest, FindsTheSourceTreesWebFolderFromTheBuildTree) {
  std::string found = findWebRoot();
  ASSERT_FALSE(found.empty());
  EXPECT_TRUE(fs::exists(found + "/index.html")) << found;
}

}  // namespace
}  // namespace gpool::controller
