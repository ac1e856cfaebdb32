// docs/openapi.json against the server: (1) the document names exactly the routes the router
// serves; (2) every GET route's answer, from a real in-process server over a Unix socket,
// matches the document's response schema (required keys, types, no undocumented keys where the
// schema closes the object), and error answers match the Error schema.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "controller/api_fixture.h"

namespace gpool::controller::testing {
namespace {

using nlohmann::json;

json loadDocument() {
  std::ifstream in(std::string(GPOOL_SOURCE_DIR) + "/docs/openapi.json");
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

// A small JSON Schema checker for the subset the document uses: $ref (local), type (a name or
// a list of names), required, properties, additionalProperties (false or a schema), items,
// enum, oneOf (at least one alternative matches). Appends "<pointer>: <problem>" to `errors`.
class SchemaChecker {
 public:
  explicit SchemaChecker(const json& document) : doc_(document) {}

  void check(const json& schema, const json& value, const std::string& at,
             std::vector<std::string>* errors) const {
    if (schema.contains("$ref")) {
      const json* target = resolve(schema["$ref"].get<std::string>());
      if (target == nullptr) {
        errors->push_back(at + ": unresolved $ref " + schema["$ref"].dump());
        return;
      }
      return check(*target, value, at, errors);
    }
    if (schema.contains("oneOf")) {
      for (const json& alternative : schema["oneOf"]) {
        std::vector<std::string> none;
        check(alternative, value, at, &none);
        if (none.empty()) return;
      }
      errors->push_back(at + ": matches no alternative of oneOf: " + value.dump());
      return;
    }
    if (schema.contains("type") && !typeMatches(schema["type"], value)) {
      errors->push_back(at + ": expected type " + schema["type"].dump() + ", got " +
                        value.type_name() + " " + value.dump());
      return;
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const json& e : schema["enum"])
        found = found || e == value;
      if (!found)
        errors->push_back(at + ": " + value.dump() + " is not in " + schema["enum"].dump());
    }
    if (value.is_object()) {
      for (const json& key : schema.value("required", json::array())) {
        if (!value.contains(key.get<std::string>())) {
          errors->push_back(at + ": required key " + key.dump() + " is missing");
        }
      }
      const json props = schema.value("properties", json::object());
      for (const auto& [key, v] : value.items()) {
        if (props.contains(key)) {
          check(props[key], v, at + "/" + key, errors);
        } else if (schema.contains("additionalProperties")) {
          const json& extra = schema["additionalProperties"];
          if (extra.is_boolean()) {
            if (!extra.get<bool>()) errors->push_back(at + ": undocumented key '" + key + "'");
          } else {
            check(extra, v, at + "/" + key, errors);
          }
        }
      }
    }
    if (value.is_array() && schema.contains("items")) {
      for (size_t i = 0; i < value.size(); ++i)
        check(schema["items"], value[i], at + "/" + std::to_string(i), errors);
    }
  }

 private:
  const json* resolve(const std::string& ref) const {
    if (ref.rfind("#/", 0) != 0) return nullptr;
    json::json_pointer pointer(ref.substr(1));
    return doc_.contains(pointer) ? &doc_.at(pointer) : nullptr;
  }

  static bool typeIs(const std::string& type, const json& value) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "integer") return value.is_number_integer();
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    if (type == "null") return value.is_null();
    return false;
  }
  static bool typeMatches(const json& type, const json& value) {
    if (type.is_string()) return typeIs(type.get<std::string>(), value);
    for (const json& t : type) {
      if (typeIs(t.get<std::string>(), value)) return true;
    }
    return false;
  }

  const json& doc_;
};

const std::set<std::string> kMethods = {"get", "put", "post", "delete", "patch"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

class OpenApiTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    doc_ = loadDocument();
    ASSERT_FALSE(doc_.is_discarded()) << "docs/openapi.json does not parse";
  }
  json doc_;
};

TEST_F(OpenApiTest, DocumentNamesExactlyTheRoutesOfTheRouter) {
  EXPECT_EQ(doc_.value("openapi", "").substr(0, 2), "3.");
  std::set<std::string> served;
  for (const net::Router::Route& route : router_.routes()) {
    if (!route.is_websocket)
      served.insert(lower(net::methodName(route.method)) + " " + route.pattern);
  }
  std::set<std::string> documented;
  for (const auto& [path, item] : doc_["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (kMethods.count(method) == 0) continue;
      // WebSocket routes (an upgrade answered 101, e.g. /v1/watch) are served by gpoold's
      // LiveFeed, not by addApiRoutes: live_feed_test and gpoold_test check them.
      if (op.contains("responses") && op["responses"].contains("101")) continue;
      documented.insert(method + " " + path);
      // Every operation documents its answers, its path parameters, and its errors.
      EXPECT_TRUE(op.contains("operationId")) << method << " " << path;
      ASSERT_TRUE(op.contains("responses")) << method << " " << path;
      bool has_success = false;
      for (const auto& [code, response] : op["responses"].items())
        has_success = has_success || code[0] == '2';
      EXPECT_TRUE(has_success) << method << " " << path << " documents no 2xx answer";
      if (path != "/v1/health") {
        EXPECT_TRUE(op["responses"].contains("4XX") || op["responses"].contains("400"))
            << method << " " << path << " documents no error answer";
      }
      std::set<std::string> declared;
      for (const json& p : op.value("parameters", json::array())) {
        if (p.value("in", "") == "path") declared.insert(p["name"].get<std::string>());
      }
      for (const json& p : item.value("parameters", json::array())) {
        if (p.value("in", "") == "path") declared.insert(p["name"].get<std::string>());
      }
      for (size_t open = path.find('{'); open != std::string::npos;
           open = path.find('{', open + 1)) {
        std::string name = path.substr(open + 1, path.find('}', open) - open - 1);
        EXPECT_TRUE(declared.count(name))
            << method << " " << path << ": path parameter '" << name << "' is not declared";
      }
    }
  }
  for (const std::string& r : served) {
    EXPECT_TRUE(documented.count(r)) << "served but not in docs/openapi.json: " << r;
  }
  for (const std::string& r : documented) {
    EXPECT_TRUE(served.count(r)) << "in docs/openapi.json but not served: " << r;
  }
  EXPECT_GE(served.size(), 25u);
}

// A path pattern with its parameters filled in with objects the fixture has.
std::string fillPath(const std::string& pattern, int64_t job_id, int64_t alert_id = 0) {
  std::string out;
  size_t i = 0;
  while (i < pattern.size()) {
    size_t open = pattern.find('{', i);
    if (open == std::string::npos) {
      out += pattern.substr(i);
      break;
    }
    out += pattern.substr(i, open - i);
    size_t close = pattern.find('}', open);
    std::string name = pattern.substr(open + 1, close - open - 1);
    if (name == "id" && pattern.rfind("/v1/alerts/", 0) == 0) {
      out += std::to_string(alert_id);
    } else if (name == "id") {
      out += std::to_string(job_id);
    } else if (name == "subject") {
      out += "group";
    } else if (name == "uuid") {
      out += "GPU-gpu-01-0";
    } else if (pattern.rfind("/v1/nodes/", 0) == 0) {
      out += "gpu-01";
    } else if (pattern.rfind("/v1/users/", 0) == 0) {
      out += "alice";
    } else {
      out += "ml";  // groups, quotas
    }
    i = close + 1;
  }
  return out;
}

TEST_F(OpenApiTest, EveryGetAnswerMatchesItsDocumentedSchema) {
  // Something of everything, so that optional parts appear in the answers.
  int64_t id = submit("alice", "ml", 500);
  place(id);
  clock_.advance(std::chrono::hours(1));
  ASSERT_TRUE(store_->recordEnd(id, api::JobState::kCompleted, 0, clock_.now(), "done").isOk());
  int64_t running = submit("bob", "vision", 1000);
  place(running);
  submit("alice", "ml", 250);
  ASSERT_EQ(call("root", net::Method::kPut, "/v1/quotas/group/ml", R"({"max_gpus":"4"})").status,
            200);
  ASSERT_EQ(
      call("root", net::Method::kPut, "/v1/qos/high", R"({"priority":10,"max_wall_time":"1h"})")
          .status,
      201);
  ASSERT_TRUE(registry_->drain("gpu-02", "maintenance").isOk());
  store::AlertRecord alert;
  alert.rule = "gpu_too_hot";
  alert.fingerprint = "0123456789abcdef";
  alert.severity = "critical";
  alert.labels_json = R"({"alertname":"GpuTooHot","severity":"critical","Hostname":"gpu-01"})";
  alert.summary = "GPU 0 of gpu-01 is at 95 C";
  alert.started = clock_.now();
  Result<int64_t> alert_id = store_->fireAlert(alert);
  ASSERT_TRUE(alert_id.ok()) << alert_id.status().toString();
  ASSERT_TRUE(store_->ackAlert(*alert_id, "root", clock_.now()).isOk());

  SchemaChecker checker(doc_);
  size_t checked = 0;
  for (const net::Router::Route& route : router_.routes()) {
    if (route.method != net::Method::kGet || route.is_websocket) continue;
    std::string target = fillPath(route.pattern, id, *alert_id);
    auto r = get("root", target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.body;
    json op = doc_["paths"][route.pattern]["get"];
    ASSERT_TRUE(op.is_object()) << route.pattern << " is not documented";
    if (op["responses"]["200"]["content"].contains("text/plain")) {
      // Not JSON (GET /metrics, Prometheus's text format): the documented media type.
      EXPECT_EQ(r.header("Content-Type").value_or("").rfind("text/plain", 0), 0u) << target;
      ++checked;
      continue;
    }
    json schema = op["responses"]["200"]["content"]["application/json"]["schema"];
    ASSERT_TRUE(schema.is_object()) << route.pattern << ": no 200 application/json schema";
    json answer = body(r);
    ASSERT_FALSE(answer.is_discarded()) << target << ": " << r.body;
    std::vector<std::string> errors;
    checker.check(schema, answer, target, &errors);
    for (const std::string& e : errors)
      ADD_FAILURE() << e;
    ++checked;
  }
  EXPECT_GE(checked, 14u);

  // Error answers have the documented Error shape.
  json error_schema = {{"$ref", "#/components/schemas/Error"}};
  for (const char* target : {"/v1/jobs/999999", "/v1/jobs/abc", "/v1/usage?by=x"}) {
    auto r = get("root", target);
    EXPECT_GE(r.status, 400) << target;
    std::vector<std::string> errors;
    checker.check(error_schema, body(r), target, &errors);
    for (const std::string& e : errors)
      ADD_FAILURE() << e;
  }
  // The checker itself catches what it must (a test that cannot fail is a defect).
  std::vector<std::string> errors;
  checker.check(error_schema, json{{"error", {{"code", 3}}}}, "probe", &errors);
  EXPECT_EQ(errors.size(), 2u);  // code is not a string; message is missing
}

}  // namespace
}  // namespace gpool::controller::testing
