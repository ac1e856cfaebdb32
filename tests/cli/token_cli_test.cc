// `gpool token`, `gpool join-token` and the remote global options (--server, --ca, the token
// from GPOOL_TOKEN, --token-file or ~/.config/gpool/token) of the real `gpool` binary against a
// real gpoold with a TLS listener on an OS-chosen port (throwaway CA from makeTestCerts). root
// makes tokens over the Unix socket; remote commands run as the token's user. No sleeps: the
// test blocks on gpoold's "tls" and "ready" lines and on waitpid.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "controller/controller_fixture.h"
#include "net/net_test_util.h"

namespace gpool::cli {
namespace {

using nlohmann::json;
namespace ct = controller::testing;
using testing::kGpool;
using testing::Output;
using testing::runProgram;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class TokenCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(net::testing::makeTestCerts(dir_.path(), &certs_).isOk());
    ASSERT_EQ(mkdir(home_.c_str(), 0700), 0);
    std::string config = testing::writeGpooldConfig(
        dir_.path() + "/gpoold.toml", dir_.path() + "/gpool.db", socket_,
        "tls_listen = \"127.0.0.1:0\"\ntls_cert = \"" + certs_.cert_file + "\"\ntls_key = \"" +
            certs_.key_file + "\"\n");
    ASSERT_EQ(gpoold_.start(config), "");
    ASSERT_EQ(gpoold_.banner().size(), 1u);
    const std::string& tls = gpoold_.banner()[0];
    ASSERT_EQ(tls.rfind("tls 127.0.0.1:", 0), 0u) << tls;
    server_ = "127.0.0.1:" + tls.substr(tls.rfind(':') + 1);
  }

  void TearDown() override {
    if (gpoold_.running()) {
      EXPECT_EQ(gpoold_.stop(), 0);
    }
  }

  // gpool as root over the Unix socket. HOME is the test's, so no real token file is read;
  // $GPOOL_SERVER is set, and the explicit --socket beats it.
  Output local(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return runProgram(kGpool, args, dir_.path(),
                      {{"HOME", home_}, {"GPOOL_TOKEN", ""}, {"GPOOL_SERVER", server_}});
  }

  // gpool over TLS with `token` in GPOOL_TOKEN (empty: none) and --ca `ca` (empty: none).
  Output remote(const std::string& token, std::vector<std::string> args, std::string ca = "") {
    if (ca.empty()) ca = certs_.ca_file;
    std::vector<std::string> global = {"--server", server_};
    if (ca != "-") global.insert(global.end(), {"--ca", ca});
    args.insert(args.begin(), global.begin(), global.end());
    return runProgram(kGpool, args, dir_.path(),
                      {{"HOME", home_}, {"GPOOL_TOKEN", token}, {"GPOOL_CA", ""}});
  }

  // A token made by root for `user`; its JSON (with "token" and "id"). The user gets a record
  // first (once): a token's user needs a uid to be served (docs/security.md).
  json tokenFor(const std::string& user, const std::string& name) {
    Output record = local({"user", "add", user, "--uid", user == "alice" ? "1001" : "1002"});
    EXPECT_TRUE(record.rc == 0 || record.rc == 5) << record.err;  // 5: it has one already
    Output o = local({"token", "create", "--user", user, "--name", name, "--json"});
    EXPECT_EQ(o.rc, 0) << o.err;
    json j = json::parse(o.out, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("token")) << o.out;
    return j.is_object() ? j : json::object();
  }

  ct::TempDir dir_;
  net::testing::TestCerts certs_;
  std::string socket_ = dir_.path() + "/gpoold.sock";
  std::string home_ = dir_.path() + "/home";
  std::string server_;
  testing::GpooldProcess gpoold_;
};

TEST_F(TokenCliTest, CreatePrintsTheTokenOnceOnStdout) {
  Output o = local({"token", "create", "--user", "alice", "--name", "laptop"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out.rfind("gpt.", 0), 0u) << o.out;
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
  EXPECT_TRUE(contains(o.err, "for alice")) << o.err;
  EXPECT_TRUE(contains(o.err, "shown only now")) << o.err;

  Output bad = local({"token", "create", "--expires-in", "soon"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_TRUE(contains(bad.err, "--expires-in 'soon'")) << bad.err;
}

TEST_F(TokenCliTest, RemoteCommandsRunAsTheTokensUser) {
  std::string alice = tokenFor("alice", "laptop")["token"];
  std::string bob = tokenFor("bob", "desk")["token"];

  Output submitted = remote(alice, {"submit", "--name", "remote", "--", "sleep", "100"});
  ASSERT_EQ(submitted.rc, 0) << submitted.err;
  EXPECT_EQ(submitted.out, "Submitted job 1\n");

  // queue defaults to the caller's jobs: alice's, though this process runs as root.
  Output queue = remote(alice, {"queue", "--json"});
  ASSERT_EQ(queue.rc, 0) << queue.err;
  json jobs = json::parse(queue.out)["jobs"];
  ASSERT_EQ(jobs.size(), 1u) << queue.out;
  EXPECT_EQ(jobs[0]["user"], "alice");
  EXPECT_EQ(jobs[0]["spec"]["name"], "remote") << jobs[0];
  Output table = remote(alice, {"queue"});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "alice")) << table.out;

  Output by_bob = remote(bob, {"cancel", "1"});
  EXPECT_EQ(by_bob.rc, 4) << by_bob.err;
  Output bobs_queue = remote(bob, {"queue", "--json"});
  ASSERT_EQ(bobs_queue.rc, 0) << bobs_queue.err;
  EXPECT_TRUE(json::parse(bobs_queue.out)["jobs"].empty()) << bobs_queue.out;

  Output by_alice = remote(alice, {"cancel", "1"});
  EXPECT_EQ(by_alice.rc, 0) << by_alice.err;
  Output shown = local({"show", "1", "--json"});
  ASSERT_EQ(shown.rc, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["state"], "CANCELLED");

  // A plain user makes tokens only for themselves, and no join tokens.
  Output for_bob = remote(alice, {"token", "create", "--user", "bob"});
  EXPECT_EQ(for_bob.rc, 4) << for_bob.err;
  EXPECT_TRUE(contains(for_bob.err, "only admins")) << for_bob.err;
  Output join = remote(alice, {"join-token", "create"});
  EXPECT_EQ(join.rc, 4) << join.err;
  EXPECT_TRUE(contains(join.err, "needs the admin role")) << join.err;

  // shell enters a job through the local agent: refused with --server before anything else.
  Output shell = remote(alice, {"shell", "1"});
  EXPECT_EQ(shell.rc, 2) << shell.err;
  EXPECT_TRUE(contains(shell.err, "does not work with --server")) << shell.err;
}

TEST_F(TokenCliTest, ARevokedTokenIsRefusedWithAHint) {
  json alice = tokenFor("alice", "laptop");
  ASSERT_EQ(remote(alice["token"], {"queue"}).rc, 0);
  std::string id = std::to_string(alice["id"].get<int64_t>());
  Output revoked = local({"token", "revoke", id});
  ASSERT_EQ(revoked.rc, 0) << revoked.err;
  EXPECT_TRUE(contains(revoked.out, "Revoked user token " + id + " of alice")) << revoked.out;

  Output refused = remote(alice["token"], {"queue"});
  EXPECT_EQ(refused.rc, 4);
  EXPECT_TRUE(contains(refused.err, "refused the API token from $GPOOL_TOKEN")) << refused.err;
  EXPECT_TRUE(contains(refused.err, "revoked")) << refused.err;
  EXPECT_TRUE(contains(refused.err, "gpool token create")) << refused.err;
  // The live route's refused WebSocket upgrade says the same.
  Output watch = remote(alice["token"], {"watch", "--count", "1"});
  EXPECT_EQ(watch.rc, 4);
  EXPECT_TRUE(contains(watch.err, "refused the API token from $GPOOL_TOKEN: token ")) << watch.err;

  EXPECT_EQ(local({"token", "revoke", "999"}).rc, 3);
  EXPECT_EQ(local({"token", "revoke", "x1"}).rc, 2);
  Output listed = local({"token", "list"});
  ASSERT_EQ(listed.rc, 0) << listed.err;
  EXPECT_TRUE(contains(listed.out, "revoked ")) << listed.out;
}

TEST_F(TokenCliTest, ServerAndCaErrorsNameWhatIsWrong) {
  std::string alice = tokenFor("alice", "laptop")["token"];
  Output wrong_ca = remote(alice, {"queue"}, certs_.other_ca_file);
  EXPECT_EQ(wrong_ca.rc, 7);
  EXPECT_TRUE(contains(wrong_ca.err, server_)) << wrong_ca.err;
  EXPECT_TRUE(contains(wrong_ca.err, "the CA in " + certs_.other_ca_file)) << wrong_ca.err;
  // Without --ca the system's trust store does not know the test CA.
  Output no_ca = remote(alice, {"queue"}, "-");
  EXPECT_EQ(no_ca.rc, 7);
  EXPECT_TRUE(contains(no_ca.err, "--ca FILE")) << no_ca.err;

  Output no_token = remote("", {"queue"});
  EXPECT_EQ(no_token.rc, 4);
  EXPECT_TRUE(contains(no_token.err, "no API token")) << no_token.err;
  EXPECT_TRUE(contains(no_token.err, "create one with `gpool token create` on the controller's"))
      << no_token.err;

  Output bad_server =
      runProgram(kGpool, {"--server", "nowhere", "queue"}, dir_.path(), {{"HOME", home_}});
  EXPECT_EQ(bad_server.rc, 2);
  EXPECT_TRUE(contains(bad_server.err, "HOST:PORT")) << bad_server.err;
  Output both = remote(alice, {"--socket", socket_, "queue"});
  EXPECT_EQ(both.rc, 2);
  EXPECT_TRUE(contains(both.err, "--socket and --server exclude each other")) << both.err;
  // $GPOOL_SERVER (and $GPOOL_CA) stand in for the flags.
  Output from_env = runProgram(kGpool, {"queue", "--json"}, dir_.path(),
                               {{"HOME", home_},
                                {"GPOOL_TOKEN", alice},
                                {"GPOOL_SERVER", server_},
                                {"GPOOL_CA", certs_.ca_file}});
  EXPECT_EQ(from_env.rc, 0) << from_env.err;
}

TEST_F(TokenCliTest, TokenFilesMustBePrivate) {
  std::string alice = tokenFor("alice", "laptop")["token"];
  std::string file = dir_.path() + "/alice.token";
  std::ofstream(file) << alice << "\n";
  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  Output open = remote("", {"--token-file", file, "queue"});
  EXPECT_EQ(open.rc, 4);
  EXPECT_TRUE(contains(open.err, "mode 0644")) << open.err;
  EXPECT_TRUE(contains(open.err, "chmod 600 " + file)) << open.err;
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  Output ok = remote("", {"--token-file", file, "queue", "--json"});
  EXPECT_EQ(ok.rc, 0) << ok.err;

  // --save writes ~/.config/gpool/token (0600, its directories 0700); --server then uses it.
  Output saved = local({"token", "create", "--name", "mine", "--save"});
  ASSERT_EQ(saved.rc, 0) << saved.err;
  std::string path = home_ + "/.config/gpool/token";
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0) << saved.err;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((home_ + "/.config/gpool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(testing::readFile(path), saved.out);
  // Root's token needs root's record too (as `gpool up` makes it): a token never becomes uid 0
  // by itself.
  ASSERT_EQ(local({"user", "add", "root", "--uid", "0", "--role", "admin"}).rc, 0);
  Output as_root = remote("", {"account", "--json"});
  ASSERT_EQ(as_root.rc, 0) << as_root.err;
  EXPECT_EQ(json::parse(as_root.out)["user"], "root");

  // With --token-file, --save writes that file instead.
  std::string named = dir_.path() + "/tokens/ci";
  Output to_named = local({"--token-file", named, "token", "create", "--save"});
  ASSERT_EQ(to_named.rc, 0) << to_named.err;
  ASSERT_EQ(stat(named.c_str(), &st), 0) << to_named.err;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(testing::readFile(named), to_named.out);
  EXPECT_TRUE(contains(to_named.err, "Saved to " + named)) << to_named.err;
}

TEST_F(TokenCliTest, ListShowsLastUse) {
  json used = tokenFor("alice", "used");
  json unused = tokenFor("alice", "unused");
  ASSERT_EQ(remote(used["token"], {"queue"}).rc, 0);

  Output table = local({"token", "list"});
  ASSERT_EQ(table.rc, 0) << table.err;
  std::istringstream in(table.out);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header.substr(0, header.find("NAME")), "ID  ") << table.out;
  for (const char* column : {"NAME", "USER", "KIND", "CREATED", "EXPIRES", "LAST_USED"})
    EXPECT_TRUE(contains(header, column)) << header;
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    bool is_used = contains(line, " used ");
    EXPECT_EQ(line.substr(line.size() - 5) == "never", !is_used) << line;
  }
  EXPECT_EQ(rows, 2) << table.out;

  Output listed = local({"token", "list", "--json"});
  ASSERT_EQ(listed.rc, 0) << listed.err;
  json tokens = json::parse(listed.out)["tokens"];
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_TRUE(tokens[0].contains("last_used_us")) << tokens[0];
  EXPECT_FALSE(tokens[1].contains("last_used_us")) << tokens[1];
  EXPECT_FALSE(tokens[0].contains("token")) << "the text is shown only once";

  // alice sees her own tokens over TLS.
  Output hers = remote(used["token"], {"token", "list", "--json"});
  ASSERT_EQ(hers.rc, 0) << hers.err;
  EXPECT_EQ(json::parse(hers.out)["tokens"].size(), 2u);
}

TEST_F(TokenCliTest, JoinTokenCreatePrintsTheAgentCommand) {
  Output o = local({"join-token", "create", "--name", "rack-3", "--reusable"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out.rfind("join.", 0), 0u) << o.out;
  std::string token = o.out.substr(0, o.out.size() - 1);
  EXPECT_TRUE(contains(o.err, "reusable join token")) << o.err;
  EXPECT_TRUE(contains(o.err, "gpool-agent --node NAME --server")) << o.err;
  EXPECT_TRUE(contains(o.err, "--join-token " + token)) << o.err;
  Output listed = local({"token", "list", "--json"});
  ASSERT_EQ(listed.rc, 0);
  json tokens = json::parse(listed.out)["tokens"];
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0]["kind"], "join");
  EXPECT_EQ(tokens[0]["reusable"], true);
  EXPECT_EQ(local({"join-token", "create", "--expires-in", "0"}).rc, 2);
}

}  // namespace
}  // namespace gpool::cli
