#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/TARGET/), from real requests
and files: the routes of docs/openapi.json with the bodies the API tests send
(tests/controller/api_routes_test.cc), the examples of docs/model.md, deploy/config's files and
the first rows of data/traces, the agent protocol encoder's output for the sample messages of
tests/protocol/agent_protocol_test.cc. Run it again after changing those; the files it writes
are committed. Usage: tests/fuzz/make_seeds.py"""

import hashlib
import json
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (folder / name).write_bytes(data)


def slug(text):
    keep = "".join(c if c.isalnum() else "_" for c in text)
    return keep.strip("_")[:60] + "_" + hashlib.sha1(text.encode()).hexdigest()[:6]


# --- JSON models (docs/model.md, with its "..." filled in) -----------------------------------
GPU = {"uuid": "GPU-5c3d0000", "index": 0, "pci_bus_id": "00000000:3B:00.0",
       "model": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "compute_capability": "8.0",
       "driver_version": "535.104.05", "cuda_version": "12.2",
       "links": [{"peer_uuid": "GPU-7a1f0000", "nvlinks": 12, "pcie": "PXB"}],
       "mig_mode": "disabled", "health": "healthy", "health_reason": "", "simulated": False}
NODE = {"name": "gpu-01", "labels": {"rack": "r1"}, "cpus_milli": 64000, "ram_mib": 524288,
        "state": "MIXED", "state_reason": "", "last_seen_us": 1700000123000000, "gpus": [GPU]}
SLICE = {"gpu_uuid": "GPU-5c3d0000", "memory_mib": 10240, "compute_milli": 250,
         "exclusive": False}
ALLOCATION = {"task": 0, "node": "gpu-01", "cpus_milli": 4000, "ram_mib": 32768,
              "slices": [SLICE]}
SPEC = {"name": "train", "command": ["torchrun", "--nproc-per-node=2", "train.py"],
        "env": {"WANDB_MODE": "offline"}, "working_dir": "/home/alice/llm",
        "resources": {"gpus": 2, "gpu_memory": "40G", "cpus": 8, "ram": "64G"},
        "tasks": 4, "nodes": 2,
        "constraints": {"gpu_models": ["NVIDIA A100-SXM4-80GB"],
                        "min_compute_capability": "8.0", "min_gpu_memory": "40G",
                        "node_labels": {"fabric": "ib"}, "datasets": ["imagenet"]},
        "time_limit": "2-00:00:00", "qos": "high", "preemptible": True, "interactive": False,
        "array": "0-31%4", "dependencies": [{"kind": "afterok", "job_id": 12}]}
SMALL_SPEC = {"name": "job", "command": ["sleep", "1"], "resources": {"gpus": "0.5"}}
JOB = {"id": 42, "spec": {"command": ["sleep", "1"], "resources": {"gpus_milli": 500}},
       "user": "alice", "uid": 1001, "group": "vision", "state": "RUNNING", "reason": "",
       "submit_time_us": 1700000000000000, "start_time_us": 1700000005000000,
       "allocations": [ALLOCATION], "requeue_count": 0}
QUOTA = {"max_gpus": "4", "gpu_hours": 100, "gpu_hours_period": "7d",
         "max_memory_per_task": "20G", "max_run_time": "30m", "priority_weight": 1}
USER = {"name": "alice", "uid": 1001, "groups": ["gpu", "vision"], "role": "group-admin",
        "default_qos": "normal", "quota": {"max_gpus_milli": 4000, "priority_weight": 1}}
GROUP = {"name": "vision", "gid": 2000, "project_dir": "/srv/projects/vision",
         "quota": {"max_gpus": "2"}}
QOS = {"name": "high", "description": "", "priority": 100, "preemptible": False,
       "max_gpus_per_user_milli": 8000, "max_wall_time_seconds": 86400,
       "grace_time_seconds": 300}
for name, value in [("gpu", GPU), ("node", NODE), ("slice", SLICE), ("allocation", ALLOCATION),
                    ("jobspec", SPEC), ("jobspec_small", SMALL_SPEC), ("job", JOB),
                    ("quota", QUOTA), ("user", USER), ("group", GROUP), ("qos", QOS)]:
    write("json_models", name + ".json", json.dumps(value))
for text in ["24G", "1.5T", "512M", "25%", "0.25", "500m", "8", "1-00:00:00", "90m", "1d12h",
             "0-31%4", "1,3,5-7", "0-15:4", "afterok:12:13,afterany:14", "8.0", "RUNNING", "PD",
             "group-admin"]:
    write("json_models", "text_" + slug(text), text)

# --- HTTP requests (docs/openapi.json's routes, api_routes_test.cc's bodies) ---------------
PEERS = {"alice": 0, "bob": 1, "carol": 2, "root": 3, "nobody": 4, "tls": 5}


def request(method, target, body=None, headers=None, peer="alice"):
    lines = [f"{method} {target} HTTP/1.1", "Host: gpoold"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    payload = b""
    if body is not None:
        payload = (body if isinstance(body, str) else json.dumps(body)).encode()
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(payload)}")
    return bytes([PEERS[peer]]) + ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


HTTP = [
    ("GET", "/v1/health", None, "tls"),
    ("POST", "/v1/jobs", SMALL_SPEC, "alice"),
    ("POST", "/v1/jobs?group=ml", {"command": ["python", "train.py"], "resources": {"gpus": 1},
                                   "array": "0-3"}, "alice"),
    ("POST", "/v1/jobs", SPEC, "bob"),
    ("GET", "/v1/jobs", None, "alice"),
    ("GET", "/v1/jobs?user=alice&state=PD&limit=10", None, "carol"),
    ("GET", "/v1/jobs?group=ml&after=1&limit=2", None, "root"),
    ("GET", "/v1/jobs/1", None, "alice"),
    ("PATCH", "/v1/jobs/1", {"time_limit": "2h", "priority": 5}, "root"),
    ("GET", "/v1/jobs/1/events", None, "bob"),
    ("POST", "/v1/jobs/1/cancel", {"reason": "x"}, "alice"),
    ("POST", "/v1/jobs/1/requeue", {}, "root"),
    ("POST", "/v1/jobs/1/hold", {}, "alice"),
    ("POST", "/v1/jobs/1/release", {}, "alice"),
    ("GET", "/v1/jobs/1/log?task=0&stream=stdout&offset=0&limit=4096", None, "alice"),
    ("GET", "/v1/jobs/1/telemetry?since=0&resolution=60", None, "alice"),
    ("GET", "/v1/nodes", None, "bob"),
    ("GET", "/v1/nodes/gpu-01", None, "bob"),
    ("POST", "/v1/nodes/gpu-01/drain", {"reason": "fan", "force": True}, "root"),
    ("POST", "/v1/nodes/gpu-01/resume", {}, "root"),
    ("GET", "/v1/gpus?node=gpu-02", None, "alice"),
    ("GET", "/v1/gpus/GPU-gpu-01-0/telemetry?resolution=10", None, "alice"),
    ("GET", "/v1/summary", None, "alice"),
    ("GET", "/v1/usage?by=user&from=2023-01-01&to=2024-01-01", None, "root"),
    ("GET", "/v1/account", None, "carol"),
    ("GET", "/v1/users", None, "root"),
    ("GET", "/v1/users/alice", None, "alice"),
    ("PUT", "/v1/users/dave", {"uid": 1004, "groups": ["ml"], "role": "group-admin"}, "root"),
    ("DELETE", "/v1/users/dave", None, "root"),
    ("GET", "/v1/groups", None, "alice"),
    ("PUT", "/v1/groups/nlp", {"gid": 3000, "project_dir": "/p"}, "root"),
    ("DELETE", "/v1/groups/nlp", None, "root"),
    ("GET", "/v1/quotas", None, "carol"),
    ("PUT", "/v1/quotas/user/alice", {"max_gpus": "2", "gpu_hours": 10,
                                      "gpu_hours_period": "7d"}, "carol"),
    ("GET", "/v1/quotas/group/ml", None, "carol"),
    ("DELETE", "/v1/quotas/user/alice", None, "root"),
    ("GET", "/v1/qos", None, "bob"),
    ("PUT", "/v1/qos/high", {"priority": 100, "preemptible": False, "grace_time": "2m"}, "root"),
    ("DELETE", "/v1/qos/high", None, "root"),
    ("POST", "/v1/tokens", {"name": "laptop", "expires_in": "1h"}, "alice"),
    ("GET", "/v1/tokens", None, "alice"),
    ("DELETE", "/v1/tokens/1", None, "root"),
    ("POST", "/v1/join-tokens", {"name": "rack", "reusable": True}, "root"),
    ("GET", "/", None, "tls"),
    ("GET", "/index.html", None, "tls"),
    ("GET", "/../CMakeLists.txt", None, "tls"),
]
for method, target, body, peer in HTTP:
    write("http_router", slug(f"{peer} {method} {target}"), request(method, target, body, peer=peer))
write("http_router", "tls_token_jobs",
      request("GET", "/v1/jobs", headers={"Authorization": "Bearer @TOKEN@"}, peer="tls"))
write("http_router", "tls_bad_token",
      request("GET", "/v1/jobs", headers={"Authorization": "Bearer gpl_nope"}, peer="tls"))
write("http_router", "agent_upgrade_join",
      request("GET", "/v1/agent", headers={"Authorization": "Bearer @JOIN@",
                                           "Connection": "Upgrade", "Upgrade": "websocket",
                                           "Sec-WebSocket-Version": "13",
                                           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="},
              peer="tls"))
write("http_router", "watch_upgrade",
      request("GET", "/v1/watch?topics=jobs,nodes&after_event=0",
              headers={"Connection": "Upgrade", "Upgrade": "websocket",
                       "Sec-WebSocket-Version": "13",
                       "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, peer="bob"))
write("http_router", "pipelined_keepalive",
      request("GET", "/v1/health", peer="alice")[0:] + request("GET", "/v1/jobs")[1:] +
      request("POST", "/v1/jobs", SMALL_SPEC)[1:])
chunked = (b"\x00POST /v1/jobs HTTP/1.1\r\nHost: gpoold\r\nTransfer-Encoding: chunked\r\n"
           b"Content-Type: application/json\r\n\r\n")
body = json.dumps(SMALL_SPEC).encode()
chunked += f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
write("http_router", "chunked_submit", chunked)

# --- configuration files (deploy/config) ----------------------------------------------------
for name in ["gpoold.toml", "gpool-agent.toml"]:
    write("config", name, (ROOT / "deploy" / "config" / name).read_bytes())
write("config", "gpoold_minimal.toml",
      '[controller]\nstore = "/var/lib/gpool/gpool.db"\nsocket = "/run/gpool/gpoold.sock"\n'
      'http_listen = "127.0.0.1:0"\nschedule_interval = "10s"\nnode_down_after = "90s"\n'
      '[log]\nlevel = "info"\n')
write("config", "agent_minimal.toml",
      '[agent]\nnode = "gpu-01"\ncontroller = "ctl01:6443"\ncpus = "8"\nram = "64G"\n'
      '[agent.labels]\nrack = "r1"\n')

# --- simulator traces (data/traces: the header and first rows of each format) ---------------
TRACES = ROOT / "data" / "traces"
for rel, rows in [("alibaba-gpu-v2023/openb_node_list_gpu_node.csv", 12),
                  ("alibaba-gpu-v2023/openb_pod_list_default.csv", 12),
                  ("alibaba-gpu-v2023/openb_pod_list_gpuspec33.csv", 12),
                  ("alibaba-gpu-v2023/openb_pod_list_multigpu20.csv", 12),
                  ("pollux-osdi21/philly.csv", 12)]:
    with open(TRACES / rel, "rb") as f:
        head = b"".join(f.readline() for _ in range(rows))
    write("sim_traces", rel.replace("/", "_"), head)
for spec in ["8x8", "4x8:A100:80,8x4:T4:16:32", "2x4:V100"]:
    write("sim_traces", "spec_" + slug(spec), spec)
write("sim_traces", "timestamp", "2017-10-09 07:01:55")


# --- vgpu regions (what the agent creates, src/agent/agent.cc, then what processes do) -------
class Provider:
    """Builds input for libFuzzer's FuzzedDataProvider: integers are taken from the end of the
    data (most significant byte first), strings from the front."""

    def __init__(self):
        self.front = bytearray()
        self.back = bytearray()  # in consumption order

    def integer(self, value, lo, hi):
        span = hi - lo
        n = 0
        while n < 8 and (span >> (8 * n)) > 0:
            n += 1
        v = value - lo
        self.back += bytes((v >> (8 * (n - 1 - i))) & 0xFF for i in range(n))

    def string(self, data):
        self.front += data.replace(b"\\", b"\\\\") + b"\\\x00"

    def data(self):
        return bytes(self.front) + bytes(reversed(self.back))


SHM_HEADER_SIZE = 8576  # sizeof(vgpu::ShmHeader), layout version 1
U64 = (0, 2**64 - 1)
U32 = (0, 2**32 - 1)
U8 = (0, 255)


def region_seed(quota, share, policy, context, period, uuid, patches, ops):
    p = Provider()
    p.integer(quota, *U64)
    p.integer(share, 0, 1001)
    p.integer(policy, 0, 1)
    p.integer(context, *U64)
    p.integer(period, *U32)
    p.integer(0, 0, 16)
    p.string(uuid)
    p.integer(len(patches), 0, 8)
    for offset, data in patches:
        p.integer(offset, 0, SHM_HEADER_SIZE - 1)
        p.string(data)
    for slot, op, args in ops:
        p.integer(slot, -1, 128)
        p.integer(op, 0, 9)
        for value, lo, hi in args:
            p.integer(value, lo, hi)
    return p.data()


GIB = 1 << 30
OWN = [(1, *U8)]  # ConsumeBool: attach this process
LIFE = [(0, 0, [(1, *U8)]), (0, 1, [(GIB, *U64)]), (0, 4, [(2 * GIB, *U64)]),
        (0, 4, [(2 * GIB, *U64)]), (0, 7, []),
        (0, 8, [(2**62, *U64), (2**63, *U64), (5000, *U32)]), (0, 2, [(GIB, *U64)]),
        (0, 3, [(GIB // 2, *U64)]), (0, 6, []), (0, 5, [])]
write("vgpu_region", "agent_slice_20g_quarter",
      region_seed(20 * GIB, 250, 0, 300 << 20, 100000, b"GPU-5c3d0000", [], LIFE))
write("vgpu_region", "agent_slice_strict",
      region_seed(4 * GIB, 500, 1, 0, 50000, b"", [], LIFE))
write("vgpu_region", "scribbled_magic",
      region_seed(GIB, 1000, 0, 0, 100000, b"GPU-1", [(0, b"GPVGPU02")], LIFE))


# --- agent frames (the encoder's output for tests/protocol/agent_protocol_test.cc's sample
# messages, and the frames tests/controller/agent_link_test.cc sends) -------------------------
FRAMES = [
    ('hello',
     '{"ack":0,"body":{"gpus":{"backend":"nvml","cuda_driver_version":"12.2","driver_version":"535.104.05","gpus":[{"compute_capability":"8.0","index":0,"memory_total_mib":81920,"mig_enabled":false,"mig_instances":[],"model":"NVIDIA A100-SXM4-80GB","pci_bus_id":"0000:07:00.0","simulated":false,"uuid":"GPU-aaaa"},{"compute_capability":"8.0","index":1,"memory_total_mib":81920,"mig_enabled":true,"mig_instances":[{"compute_instance_id":0,"gpu_instance_id":7,"memory_mib":9856,"profile":"1g.10gb","uuid":"MIG-1"}],"model":"NVIDIA A100-SXM4-80GB","pci_bus_id":"0000:0f:00.0","simulated":true,"uuid":"GPU-bbbb"}],"links":[{"gpu_a":0,"gpu_b":1,"level":"NV12","nvlink_count":12},{"gpu_a":1,"gpu_b":0,"level":"PIX","nvlink_count":0}],"simulated":false},"last_node_epoch":41,"node":{"agent_version":"0.1.0","cgroup":"v2","cpu_millis":64000,"hostname":"node-a.example","labels":{"rack":"r1"},"name":"node-a","os":"Linux 6.1","ram_mib":515000},"tasks":[{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"cancelled":false,"ended_at_us":1700000060000000,"exit_code":4,"final_state":"FAILED","log_paths":["/var/lib/gpool/agent/tasks/123.2/stdout.log","/var/lib/gpool/agent/tasks/123.2/stderr.log"],"name":"123.2","oom_killed":false,"pid":4242,"reason":"exited with 4","shell_socket":"/run/gpool/agent/shell.sock","signal":0,"started_at_us":1700000000000000,"state":"exited","stop_reason":"timeout","timed_out":true},{"final_state":"RUNNING","name":"77.0","pid":99,"started_at_us":0,"state":"running"}]},"seq":1,"type":"hello","v":1}'),
    ('heartbeat',
     '{"ack":0,"body":{"lease_ok":true,"time_us":1700000000123456},"seq":2,"type":"heartbeat","v":1}'),
    ('task_update',
     '{"ack":0,"body":{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"cancelled":false,"ended_at_us":1700000060000000,"exit_code":4,"final_state":"FAILED","log_paths":["/var/lib/gpool/agent/tasks/123.2/stdout.log","/var/lib/gpool/agent/tasks/123.2/stderr.log"],"name":"123.2","oom_killed":false,"pid":4242,"reason":"exited with 4","shell_socket":"/run/gpool/agent/shell.sock","signal":0,"started_at_us":1700000000000000,"state":"exited","stop_reason":"timeout","timed_out":true},"seq":3,"type":"task_update","v":1}'),
    ('task_update',
     '{"ack":0,"body":{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"final_state":"","pid":0,"started_at_us":0,"state":"starting"},"seq":4,"type":"task_update","v":1}'),
    ('telemetry',
     '{"ack":0,"body":{"gpus":[{"ecc_corrected":2,"ecc_uncorrected":null,"index":3,"memory_clock_mhz":1593,"memory_total_mib":81920,"memory_used_mib":12000,"memory_utilization_pct":40,"power_w":312.5,"processes":[{"job_id":123,"pid":1234,"task":2,"used_mib":11000},{"pid":999,"used_mib":50}],"sm_clock_mhz":1410,"temperature_c":61,"utilization_pct":87,"uuid":"GPU-aaaa","xid_errors":[79,48]},{"ecc_corrected":null,"ecc_uncorrected":null,"index":0,"memory_clock_mhz":0,"memory_total_mib":0,"memory_used_mib":0,"memory_utilization_pct":0,"power_w":0.0,"processes":[],"sm_clock_mhz":0,"temperature_c":0,"utilization_pct":0,"uuid":"GPU-bbbb","xid_errors":[]}],"simulated":true,"taken_at_us":1700000000000000},"seq":5,"type":"telemetry","v":1}'),
    ('health',
     '{"ack":0,"body":{"findings":[{"check":"xid","gpu_uuid":"GPU-aaaa","message":"XID 79","pid":0,"severity":"critical","unhealthy":true,"used_mib":0},{"action":"killed","check":"stray_process","gpu_uuid":"GPU-bbbb","message":"process 777 belongs to no task","pid":777,"severity":"warning","unhealthy":false,"used_mib":512}],"time_us":1700000000000000},"seq":6,"type":"health","v":1}'),
    ('log_data',
     '{"ack":0,"body":{"data":"bGluZSAxCmxpbmUgACAy/w==","found":true,"job_id":123,"lease_epoch":9,"offset":1024,"request":5,"size":4096,"stream":"stderr","task":2},"seq":7,"type":"log_data","v":1}'),
    ('log_data',
     '{"ack":0,"body":{"error":"the log is gone","job_id":123,"lease_epoch":9,"offset":0,"request":6,"stream":"stdout","task":2},"seq":8,"type":"log_data","v":1}'),
    ('log_data',
     '{"ack":0,"body":{"found":false,"job_id":123,"lease_epoch":9,"offset":0,"request":7,"stream":"stdout","task":2},"seq":9,"type":"log_data","v":1}'),
    ('log_data',
     '{"ack":0,"body":{"data":"","error":"cannot read it","found":true,"job_id":123,"lease_epoch":9,"offset":0,"request":8,"size":100,"stream":"stdout","task":2},"seq":10,"type":"log_data","v":1}'),
    ('error',
     '{"ack":0,"body":{"code":"invalid_argument","in_reply_to":17,"message":"body.node.bogus: unknown field"},"seq":11,"type":"error","v":1}'),
    ('welcome',
     '{"ack":0,"body":{"config":{"heartbeat_interval_s":2,"stray_policy":"kill","telemetry_interval_s":10},"lease":{"duration_s":10,"renew_every_s":2},"node_credential":"node.5.secret","node_epoch":12},"seq":12,"type":"welcome","v":1}'),
    ('welcome',
     '{"ack":0,"body":{"node_epoch":12},"seq":13,"type":"welcome","v":1}'),
    ('desired_state',
     '{"ack":0,"body":{"drain":false,"node_epoch":12,"tasks":[{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"launch":{"argv":["python3","train.py","--epochs","3"],"cpus_milli":8000,"env":{"A":"1","B":"two words"},"gid":1001,"gpus":["GPU-aaaa"],"grace_seconds":45,"memory_mib":32768,"pids_max":4096,"rendezvous":{"local_rank":0,"master_addr":"node-a.example","master_port":29501,"node_rank":1,"rank":2,"world_size":4},"slice":{"compute_milli":250,"memory_mib":20480},"time_limit_seconds":3600,"uid":1001,"user":"alice","working_dir":"/home/alice/project"},"requeueable":true},{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"launch":{"argv":["python3","train.py","--epochs","3"],"cpus_milli":8000,"env":{"A":"1","B":"two words"},"gid":1001,"gpus":["GPU-aaaa"],"grace_seconds":45,"memory_mib":32768,"pids_max":4096,"rendezvous":{"local_rank":0,"master_addr":"node-a.example","master_port":29501,"node_rank":1,"rank":2,"world_size":4},"slice":{"compute_milli":250,"memory_mib":20480},"time_limit_seconds":3600,"uid":1001,"user":"alice","working_dir":"/home/alice/project"},"requeueable":true}]},"seq":14,"type":"desired_state","v":1}'),
    ('desired_state',
     '{"ack":0,"body":{"drain":true,"node_epoch":13,"tasks":[]},"seq":15,"type":"desired_state","v":1}'),
    ('assign',
     '{"ack":0,"body":{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"launch":{"argv":["python3","train.py","--epochs","3"],"cpus_milli":8000,"env":{"A":"1","B":"two words"},"gid":1001,"gpus":["GPU-aaaa"],"grace_seconds":45,"memory_mib":32768,"pids_max":4096,"rendezvous":{"local_rank":0,"master_addr":"node-a.example","master_port":29501,"node_rank":1,"rank":2,"world_size":4},"slice":{"compute_milli":250,"memory_mib":20480},"time_limit_seconds":3600,"uid":1001,"user":"alice","working_dir":"/home/alice/project"},"node_epoch":12,"requeueable":true},"seq":16,"type":"assign","v":1}'),
    ('assign',
     '{"ack":0,"body":{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"launch":{"argv":["python3","train.py","--epochs","3"],"cpus_milli":8000,"env":{"A":"1","B":"two words"},"gid":1001,"gpus":["GPU-aaaa"],"grace_seconds":45,"memory_mib":32768,"pids_max":4096,"rendezvous":{"local_rank":0,"master_addr":"node-a.example","master_port":29501,"node_rank":1,"rank":2,"world_size":4},"slice":{"compute_milli":250,"memory_mib":20480},"time_limit_seconds":3600,"uid":1001,"user":"alice","working_dir":"/home/alice/project"},"requeueable":true},"seq":17,"type":"assign","v":1}'),
    ('cancel',
     '{"ack":0,"body":{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"grace_s":30,"reason":"node_fail","signal":"TERM"},"seq":18,"type":"cancel","v":1}'),
    ('cancel',
     '{"ack":0,"body":{"assignment":{"attempt":1,"job_id":123,"lease_epoch":9,"task":2},"reason":"cancelled","signal":"TERM"},"seq":19,"type":"cancel","v":1}'),
    ('read_log',
     '{"ack":0,"body":{"job_id":123,"lease_epoch":9,"max_bytes":1048576,"offset":0,"request":5,"stream":"stdout","task":2},"seq":20,"type":"read_log","v":1}'),
    ('lease',
     '{"ack":0,"body":{"node_epoch":12,"valid_until":1700000060000000},"seq":21,"type":"lease","v":1}'),
]

AGENT_PEERS = {"root": 0, "join": 1, "alice": 2}


def frames_seed(peer, *texts):
    return bytes([AGENT_PEERS[peer]]) + "\n".join(texts).encode()


by_type = {}
for kind, text in FRAMES:
    by_type.setdefault(kind, []).append(text)
hello = by_type["hello"][0]
for kind, texts in by_type.items():
    for i, text in enumerate(texts):
        if kind == "hello":
            write("agent_protocol", f"root_hello_{i}", frames_seed("root", text))
            write("agent_protocol", f"join_hello_{i}", frames_seed("join", text))
        elif kind in ("heartbeat", "task_update", "telemetry", "health", "log_data", "error"):
            write("agent_protocol", f"root_hello_then_{kind}_{i}", frames_seed("root", hello, text))
        else:  # what gpoold sends: the decoder's round trip; gpoold answers "unimplemented"
            write("agent_protocol", f"controller_{kind}_{i}", frames_seed("root", hello, text))
write("agent_protocol", "alice_refused", frames_seed("alice", hello))
write("agent_protocol", "root_heartbeat_before_hello",
      frames_seed("root", by_type["heartbeat"][0]))
write("agent_protocol", "root_newer_version",
      frames_seed("root", '{"v":2,"type":"hello","seq":1,"ack":0,"body":{}}'))
write("agent_protocol", "root_hello_twice_then_everything",
      frames_seed("root", hello, hello, *[t for k, ts in by_type.items()
                                          if k in ("heartbeat", "task_update", "telemetry",
                                                   "health", "log_data")
                                          for t in ts]))
