// The agent protocol module (src/protocol/agent_protocol.h) on its own: every message encodes
// and decodes back to an equal value, and the decoder is strict (unknown fields, wrong types,
// out-of-range values and broken cross-field rules are errors naming their path). No daemon, no
// root.
#include "protocol/agent_protocol.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "api/json_reader.h"

namespace gpool::protocol {
namespace {

using nlohmann::json;

// Encodes `m` in a frame, reads the frame back through decodeEnvelope and decodeBody, and
// checks that the result equals `m`; also that the frame survives a trip through text.
template <typename M>
void expectRoundTrip(const M& m) {
  json frame = encodeMessage(m, 7, 3);
  Result<json> reparsed = api::parseJsonText(api::dumpJson(frame), "frame");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().toString();
  Result<Envelope> env = decodeEnvelope(*reparsed);
  ASSERT_TRUE(env.ok()) << env.status().toString();
  EXPECT_EQ(env->type, M::kType);
  EXPECT_EQ(env->seq, 7);
  EXPECT_EQ(env->ack, 3);
  EXPECT_EQ(env->v, kVersion);
  Result<M> back = decodeBody<M>(env->body);
  ASSERT_TRUE(back.ok()) << back.status().toString() << "\n" << api::dumpJson(frame, 2);
  EXPECT_TRUE(*back == m) << api::dumpJson(toJson(*back), 2) << "\nvs\n"
                          << api::dumpJson(toJson(m), 2);
}

// The message of a failed decode of `body` as a message of type M.
template <typename M>
std::string decodeError(const json& body) {
  Result<M> r = decodeBody<M>(body);
  if (r.ok()) return "decoded without error";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().toString();
  return r.status().message();
}

Assignment anAssignment() {
  Assignment a;
  a.job_id = 123;
  a.task = 2;
  a.attempt = 1;
  a.lease_epoch = 9;
  a.incarnation = 1796608038930001;
  return a;
}

TaskReport anExitedReport() {
  TaskReport t;
  t.assignment = anAssignment();
  t.name = "123.2";
  t.state = TaskPhase::kExited;
  t.final_state = "FAILED";
  t.pid = 4242;
  t.started_at_us = 1'700'000'000'000'000;
  t.log_paths = {"/var/lib/gpool/agent/tasks/123.2/stdout.log",
                 "/var/lib/gpool/agent/tasks/123.2/stderr.log"};
  t.shell_socket = "/run/gpool/agent/shell.sock";
  t.ended_at_us = 1'700'000'060'000'000;
  t.exit_code = 4;
  t.signal = 0;
  t.oom_killed = false;
  t.timed_out = true;
  t.cancelled = false;
  t.reason = "exited with 4";
  t.stop_reason = "timeout";
  return t;
}

TaskEntry anEntry() {
  TaskEntry e;
  e.assignment = anAssignment();
  e.requeueable = true;
  Launch& l = e.launch;
  l.argv = {"python3", "train.py", "--epochs", "3"};
  l.env = {{"A", "1"}, {"B", "two words"}};
  l.working_dir = "/home/alice/project";
  l.user = "alice";
  l.uid = 1001;
  l.gid = 1001;
  l.cpus_milli = 8000;
  l.memory_mib = 32768;
  l.pids_max = 4096;
  l.gpus = {"GPU-aaaa"};
  l.slice = SliceTerms{20480, 250};
  l.rendezvous = RendezvousTerms{"node-a.example", 29501, 4, 2, 0, 1};
  l.time_limit_seconds = 3600;
  l.grace_seconds = 45;
  return e;
}

TEST(AgentProtocolTest, HelloRoundTrips) {
  Hello m;
  m.node =
      NodeInfo{"node-a", "node-a.example", {{"rack", "r1"}}, 64000, 515000, "0.1.0", "Linux 6.1",
               "v2",     std::nullopt};
  GpuInfo g0{"GPU-aaaa", 0,  "0000:07:00.0", "NVIDIA A100-SXM4-80GB", 81920, "8.0",
             false,      {}, false};
  GpuInfo g1{"GPU-bbbb", 1,     "0000:0f:00.0", "NVIDIA A100-SXM4-80GB",
             81920,      "8.0", true,           {MigInstance{"MIG-1", "1g.10gb", 7, 0, 9856}},
             true};
  m.gpus =
      Inventory{"nvml", false,    "535.104.05",
                "12.2", {g0, g1}, {GpuLinkInfo{0, 1, "NV12", 12}, GpuLinkInfo{1, 0, "PIX", 0}}};
  m.tasks.push_back(anExitedReport());
  TaskReport running;
  running.name = "77.0";  // found without its assignment file
  running.state = TaskPhase::kRunning;
  running.final_state = "RUNNING";
  running.pid = 99;
  m.tasks.push_back(running);
  m.last_node_epoch = 41;
  expectRoundTrip(m);
  // How the node enforces slices: absent (an older agent) or said.
  m.node.slices = SliceEnforcement{true, false, "interposer /usr/lib/gpool/libgpool-vgpu.so"};
  expectRoundTrip(m);
  json half = toJson(m);
  half["node"]["slices"].erase("backstop");
  EXPECT_NE(decodeError<Hello>(half).find("node.slices.backstop"), std::string::npos);
}

TEST(AgentProtocolTest, EveryOtherMessageRoundTrips) {
  expectRoundTrip(Heartbeat{1'700'000'000'123'456, true});
  expectRoundTrip(TaskUpdate{anExitedReport()});
  TaskUpdate starting;
  starting.report.assignment = anAssignment();
  starting.report.state = TaskPhase::kStarting;
  expectRoundTrip(starting);

  Telemetry t;
  t.taken_at_us = 1'700'000'000'000'000;
  t.simulated = true;
  GpuSample s;
  s.uuid = "GPU-aaaa";
  s.index = 3;
  s.utilization_pct = 87;
  s.memory_utilization_pct = 40;
  s.memory_used_mib = 12000;
  s.memory_total_mib = 81920;
  s.temperature_c = 61;
  s.power_w = 312.5;
  s.sm_clock_mhz = 1410;
  s.memory_clock_mhz = 1593;
  s.ecc_corrected = 2;
  s.xid_errors = {79, 48};
  s.processes = {GpuProcessSample{1234, 11000, 123, 2}, GpuProcessSample{999, 50, {}, {}}};
  s.slices = {SliceUsageSample{123, 2, 240, 5000, 1'500'000},
              SliceUsageSample{124, 0, 0, 0, std::nullopt}};
  t.gpus = {s, GpuSample{}};
  t.gpus[1].uuid = "GPU-bbbb";
  expectRoundTrip(t);

  expectRoundTrip(Health{{Finding{"xid", "critical", "GPU-aaaa", 0, 0, true, "XID 79", "", ""},
                          Finding{"stray_process", "warning", "GPU-bbbb", 777, 512, false,
                                  "process 777 belongs to no task", "killed", "bob"}},
                         1'700'000'000'000'000});
  std::string bytes("line 1\nline \0 2\xff\n", 16);
  expectRoundTrip(LogData{5, 123, 2, 9, "stderr", 1024, true, 4096, bytes, ""});
  expectRoundTrip(LogData{6, 123, 2, 9, "stdout", 0, false, 0, "", "the log is gone"});
  expectRoundTrip(LogData{7, 123, 2, 9, "stdout", 0, false, 0, "", ""});  // no such log
  expectRoundTrip(LogData{8, 123, 2, 9, "stdout", 0, true, 100, "", "cannot read it"});
  expectRoundTrip(Error{"invalid_argument", "body.node.bogus: unknown field", 17});

  expectRoundTrip(Welcome{12, "node.5.secret", LeaseTerms{10, 2, 3},
                          WelcomeConfig{2, 10, std::string("kill"), 5}});
  expectRoundTrip(Welcome{12, "", std::nullopt, std::nullopt});
  expectRoundTrip(DesiredState{12, {anEntry(), anEntry()}, false});
  expectRoundTrip(DesiredState{13, {}, true});
  expectRoundTrip(Assign{12, anEntry()});
  expectRoundTrip(Assign{std::nullopt, anEntry()});
  expectRoundTrip(TaskAck{anAssignment(), TaskPhase::kExited});
  expectRoundTrip(TaskAck{anAssignment(), TaskPhase::kRunning});
  EXPECT_EQ(decodeError<TaskAck>(json{{"assignment", toJson(anAssignment())}, {"state", "gone"}}),
            "state: expected starting, running or exited");
  EXPECT_EQ(decodeError<TaskAck>(json{{"state", "exited"}}),
            "assignment: required field is missing");
  expectRoundTrip(Cancel{anAssignment(), "TERM", 30, "node_fail"});
  expectRoundTrip(Cancel{anAssignment(), "TERM", std::nullopt, "cancelled"});
  expectRoundTrip(ReadLog{5, 123, 2, 9, "stdout", 0, kMaxLogReadBytes});
  expectRoundTrip(ReadLog{5, 123, 2, 9, "stdout", 0, kMaxLogReadBytes, 1796608038930001});
  expectRoundTrip(Lease{12, 1'700'000'060'000'000, 41});
}

// A minimal entry: absent fields take their defaults, and the encoder writes none of them.
TEST(AgentProtocolTest, AbsentFieldsTakeTheirDefaults) {
  json entry{{"assignment", {{"job_id", 5}, {"task", 0}, {"lease_epoch", 1}}},
             {"launch", {{"argv", {"true"}}, {"user", "bob"}}}};
  Result<TaskEntry> e = decodeBody<TaskEntry>(entry);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ(e->assignment.attempt, 0);
  EXPECT_FALSE(e->requeueable);
  EXPECT_FALSE(e->launch.uid.has_value());
  EXPECT_FALSE(e->launch.grace_seconds.has_value());
  EXPECT_FALSE(e->launch.slice.has_value());
  EXPECT_EQ(e->launch.time_limit_seconds, 0);
  // The encoder writes no field for an absent value, so the text is the same as the input.
  EXPECT_EQ(toJson(*e)["launch"], entry["launch"]);
}

TEST(AgentProtocolTest, DesiredStateWithAnInvalidEntryIsRefused) {
  json body = toJson(DesiredState{3, {anEntry()}, false});
  body["tasks"][0]["launch"].erase("user");
  EXPECT_EQ(decodeError<DesiredState>(body), "tasks[0].launch.user: required field is missing");
}

TEST(AgentProtocolTest, EnvelopeIsStrict) {
  EXPECT_EQ(decodeEnvelope(json::array()).status().code(), StatusCode::kInvalidArgument);
  json ok = encodeEnvelope("hello", 1, 0, json::object());
  ASSERT_TRUE(decodeEnvelope(ok).ok());

  json extra = ok;
  extra["bogus"] = 1;
  EXPECT_NE(decodeEnvelope(extra).status().message().find("bogus"), std::string::npos);

  json no_body = ok;
  no_body.erase("body");
  EXPECT_EQ(decodeEnvelope(no_body).status().message(), "body: required field is missing");

  json body_string = ok;
  body_string["body"] = "x";
  EXPECT_EQ(decodeEnvelope(body_string).status().message(),
            "body: expected an object, got a string");

  json seq0 = ok;
  seq0["seq"] = 0;
  EXPECT_EQ(decodeEnvelope(seq0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(decodeEnvelope(seq0).status().message().find("seq"), std::string::npos);

  json v0 = ok;
  v0["v"] = 0;
  EXPECT_EQ(decodeEnvelope(v0).status().code(), StatusCode::kInvalidArgument);
  json v_text = ok;
  v_text["v"] = "1";
  EXPECT_EQ(decodeEnvelope(v_text).status().code(), StatusCode::kInvalidArgument);
}

TEST(AgentProtocolTest, NewerVersionIsFailedPreconditionBeforeAnythingElse) {
  // A frame of version 2 that would not decode as ours in other ways still says "version".
  json v2{{"v", 2}, {"type", 17}, {"future", true}};
  Result<Envelope> r = decodeEnvelope(v2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "v: protocol version 2 is not supported (this side speaks 1)");
  json huge{{"v", std::numeric_limits<uint64_t>::max()}};
  EXPECT_EQ(decodeEnvelope(huge).status().code(), StatusCode::kFailedPrecondition);
}

TEST(AgentProtocolTest, PeekSeqNeverFails) {
  EXPECT_EQ(peekSeq(json{{"seq", 17}}), 17);
  EXPECT_EQ(peekSeq(json{{"seq", "17"}}), 0);
  EXPECT_EQ(peekSeq(json{{"seq", std::numeric_limits<uint64_t>::max()}}), 0);
  EXPECT_EQ(peekSeq(json::array()), 0);
  EXPECT_EQ(peekSeq(json(nullptr)), 0);
}

TEST(AgentProtocolTest, UnknownFieldsAreNamedWithTheirPath) {
  json hello = toJson(Hello{});
  hello["node"]["bogus"] = 1;
  EXPECT_NE(decodeError<Hello>(hello).find("node.bogus: unknown field"), std::string::npos);

  json entry = toJson(anEntry());
  entry["launch"]["rendezvous"]["nope"] = 1;
  EXPECT_NE(decodeError<TaskEntry>(entry).find("launch.rendezvous.nope: unknown field"),
            std::string::npos);

  json update = toJson(TaskUpdate{anExitedReport()});
  update["assignment"]["epoch"] = 1;
  EXPECT_NE(decodeError<TaskUpdate>(update).find("assignment.epoch: unknown field"),
            std::string::npos);
}

TEST(AgentProtocolTest, TaskReportsAreChecked) {
  json update = toJson(TaskUpdate{anExitedReport()});
  update.erase("assignment");
  EXPECT_EQ(decodeError<TaskUpdate>(update), "assignment: required field is missing");
  // In hello, a task without its assignment is legal.
  Hello hello;
  hello.tasks.push_back(anExitedReport());
  hello.tasks[0].assignment.reset();
  EXPECT_TRUE(decodeBody<Hello>(toJson(hello)).ok());

  json bad_state = toJson(TaskUpdate{anExitedReport()});
  bad_state["state"] = "done";
  EXPECT_EQ(decodeError<TaskUpdate>(bad_state), "state: expected starting, running or exited");
  json bad_exit = toJson(TaskUpdate{anExitedReport()});
  bad_exit["exit_code"] = 256;
  EXPECT_NE(decodeError<TaskUpdate>(bad_exit).find("exit_code"), std::string::npos);
  json one_log = toJson(TaskUpdate{anExitedReport()});
  one_log["log_paths"] = json::array({"/x"});
  EXPECT_EQ(decodeError<TaskUpdate>(one_log), "log_paths: expected [stdout, stderr]");
  json epoch0 = toJson(TaskUpdate{anExitedReport()});
  epoch0["assignment"]["lease_epoch"] = 0;
  EXPECT_NE(decodeError<TaskUpdate>(epoch0).find("assignment.lease_epoch"), std::string::npos);
}

TEST(AgentProtocolTest, InventoriesAreChecked) {
  GpuInfo g{"GPU-a", 0, "", "A100", 81920, "8.0", false, {}, false};
  Hello h;
  h.gpus.gpus = {g, g};
  h.gpus.gpus[1].uuid = "GPU-b";
  EXPECT_EQ(decodeError<Hello>(toJson(h)), "gpus.gpus: index 0 appears twice");

  h.gpus.gpus[1].index = 1;
  h.gpus.links = {GpuLinkInfo{0, 5, "NV4", 4}};
  EXPECT_EQ(decodeError<Hello>(toJson(h)), "gpus.links[0]: names a GPU index not in gpus");

  h.gpus.links = {GpuLinkInfo{0, 1, "WIRE", 0}};
  EXPECT_NE(decodeError<Hello>(toJson(h)).find("gpus.links[0].level"), std::string::npos);

  h.gpus.links.clear();
  h.gpus.gpus[0].compute_capability = "eight";
  EXPECT_NE(decodeError<Hello>(toJson(h)).find("gpus.gpus[0].compute_capability"),
            std::string::npos);
  h.gpus.gpus[0].compute_capability = "0.0";  // unknown: accepted
  EXPECT_TRUE(decodeBody<Hello>(toJson(h)).ok());

  h.gpus.gpus[0].uuid = "";
  EXPECT_EQ(decodeError<Hello>(toJson(h)), "gpus.gpus[0].uuid: must not be empty");
}

TEST(AgentProtocolTest, LaunchRulesAreChecked) {
  json entry = toJson(anEntry());
  entry["launch"]["gpus"] = json::array({"GPU-a", "GPU-b"});
  EXPECT_EQ(decodeError<TaskEntry>(entry), "launch.slice: a slice needs exactly one GPU in gpus");

  entry = toJson(anEntry());
  entry["launch"]["argv"] = json::array();
  EXPECT_EQ(decodeError<TaskEntry>(entry), "launch.argv: must not be empty");

  entry = toJson(anEntry());
  entry["launch"]["uid"] = 4294967295u;  // (uid_t)-1 is never a user
  EXPECT_NE(decodeError<TaskEntry>(entry).find("launch.uid"), std::string::npos);

  entry = toJson(anEntry());
  entry["launch"]["slice"]["compute_milli"] = 1001;
  EXPECT_NE(decodeError<TaskEntry>(entry).find("launch.slice.compute_milli"), std::string::npos);
}

TEST(AgentProtocolTest, AssignCarriesTheNodeEpochBesideTheEntry) {
  json body = toJson(Assign{12, anEntry()});
  EXPECT_EQ(body["node_epoch"], 12);
  EXPECT_TRUE(body.contains("assignment"));
  EXPECT_TRUE(body.contains("launch"));
  // A task entry proper has no node_epoch: strict.
  EXPECT_EQ(decodeError<TaskEntry>(body), "node_epoch: unknown field");
}

TEST(AgentProtocolTest, CancelAndReadLogAreChecked) {
  json cancel = toJson(Cancel{anAssignment(), "TERM", std::nullopt, "cancelled"});
  cancel["signal"] = "KILL";
  EXPECT_EQ(decodeError<Cancel>(cancel), "signal: only TERM is supported");
  cancel["signal"] = "TERM";
  cancel["reason"] = "bored";
  EXPECT_EQ(decodeError<Cancel>(cancel),
            "reason: expected cancelled, preempted, timeout or node_fail");
  // The controller may leave `attempt` out of a cancel.
  json no_attempt = toJson(Cancel{anAssignment(), "TERM", std::nullopt, "timeout"});
  no_attempt["assignment"].erase("attempt");
  EXPECT_TRUE(decodeBody<Cancel>(no_attempt).ok());
  // So may a store from before incarnations leave out `incarnation` (0); never negative.
  json no_incarnation = toJson(Cancel{anAssignment(), "TERM", std::nullopt, "timeout"});
  no_incarnation["assignment"].erase("incarnation");
  Result<Cancel> legacy = decodeBody<Cancel>(no_incarnation);
  ASSERT_TRUE(legacy.ok()) << legacy.status().toString();
  EXPECT_EQ(legacy->assignment.incarnation, 0);
  no_incarnation["assignment"]["incarnation"] = -1;
  EXPECT_NE(decodeError<Cancel>(no_incarnation).find("assignment.incarnation"), std::string::npos);

  json read = toJson(ReadLog{1, 2, 0, 3, "stdout", 0, 10});
  read["max_bytes"] = kMaxLogReadBytes + 1;
  EXPECT_NE(decodeError<ReadLog>(read).find("max_bytes"), std::string::npos);
  read["max_bytes"] = 10;
  read["stream"] = "stdin";
  EXPECT_EQ(decodeError<ReadLog>(read), "stream: expected stdout or stderr");
}

TEST(AgentProtocolTest, LogDataIsChecked) {
  json data = toJson(LogData{1, 2, 0, 3, "stdout", 0, true, 3, "abc", ""});
  data["data"] = "not base64!";
  EXPECT_NE(decodeError<LogData>(data).find("data: "), std::string::npos);
  data =
      toJson(LogData{1, 2, 0, 3, "stdout", 0, true, 0, std::string(kMaxLogReadBytes + 1, 'x'), ""});
  EXPECT_EQ(decodeError<LogData>(data),
            "data: 1048577 bytes, more than the 1048576 a read may return");
}

TEST(AgentProtocolTest, TelemetryIsChecked) {
  Telemetry t;
  t.gpus.push_back(GpuSample{});
  t.gpus[0].uuid = "GPU-a";
  json body = toJson(t);
  body["gpus"][0]["power_w"] = "hot";
  EXPECT_EQ(decodeError<Telemetry>(body), "gpus[0].power_w: expected a number, got a string");
  body = toJson(t);
  body["gpus"][0]["xid_errors"] = json::array({-1});
  EXPECT_NE(decodeError<Telemetry>(body).find("gpus[0].xid_errors"), std::string::npos);
  body = toJson(t);
  body["gpus"][0]["utilization_pct"] = 101;
  EXPECT_NE(decodeError<Telemetry>(body).find("gpus[0].utilization_pct"), std::string::npos);
  body = toJson(t);
  body["gpus"][0]["slices"] = json::array({{{"job_id", 7}, {"compute_used_permille", 1001}}});
  EXPECT_NE(decodeError<Telemetry>(body).find("gpus[0].slices[0].task"), std::string::npos)
      << decodeError<Telemetry>(body);
  body["gpus"][0]["slices"][0]["task"] = 0;
  EXPECT_NE(decodeError<Telemetry>(body).find("gpus[0].slices[0].compute_used_permille"),
            std::string::npos)
      << decodeError<Telemetry>(body);
}

TEST(AgentProtocolTest, WelcomeAndLeaseAreChecked) {
  json welcome = toJson(Welcome{1, "", LeaseTerms{0, std::nullopt, std::nullopt}, std::nullopt});
  EXPECT_NE(decodeError<Welcome>(welcome).find("lease.duration_s"), std::string::npos);
  welcome = toJson(Welcome{1, "", std::nullopt, WelcomeConfig{{}, {}, std::string("ignore"), {}}});
  EXPECT_EQ(decodeError<Welcome>(welcome), "config.stray_policy: expected \"report\" or \"kill\"");
  EXPECT_EQ(decodeError<Lease>(json{{"node_epoch", 1}, {"renews", 3}}),
            "valid_until: required field is missing");
  EXPECT_EQ(decodeError<Lease>(json{{"node_epoch", 1}, {"valid_until", 5}}),
            "renews: required field is missing");
}

TEST(AgentProtocolTest, TaskNamesJoinJobAndTask) {
  EXPECT_EQ(taskName(anAssignment()), "123.2");
  EXPECT_EQ(taskName(7, 0), "7.0");
}

}  // namespace
}  // namespace gpool::protocol
