#!/usr/bin/env python3
"""Writes a large nominal machine for the scale bench (bench/scale.sh): HOSTS HGX-H100-like hosts of
8 GPUs (one NVSwitch fabric, 4 PCIe Gen5 switches, 2 sockets, one 400 Gb/s NIC per switch), hosts
joined by a network link between their first NICs (a full mesh, as a merged multi-host profile
describes its fabric). 128 hosts = 1024 GPUs.

usage: make_machine.py HOSTS OUT.json
"""
import json
import sys


def host(h):
    gpus, nodes, links = [], [], []
    p = f"h{h}-"
    for s in range(2):
        nodes.append({"id": f"{p}cpu{s}", "kind": "cpu_socket", "numa": 2 * h + s, "mem_gbps": 307.2})
    nodes.append({"id": f"{p}nvswitch", "kind": "nvswitch"})
    for w in range(4):
        nodes += [{"id": f"{p}hb{w}", "kind": "host_bridge"}, {"id": f"{p}sw{w}", "kind": "pcie_switch"},
                  {"id": f"{p}nic{w}", "kind": "nic"}]
        links += [{"a": f"{p}sw{w}", "b": f"{p}hb{w}", "kind": "pcie", "pcie_gen": 5, "pcie_width": 16},
                  {"a": f"{p}hb{w}", "b": f"{p}cpu{w // 2}", "kind": "pcie", "pcie_gen": 5, "pcie_width": 16},
                  {"a": f"{p}nic{w}", "b": f"{p}sw{w}", "kind": "pcie", "pcie_gen": 5, "pcie_width": 16}]
    for i in range(8):
        g = 8 * h + i
        gpus.append({"id": g, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85520809984, "sm_count": 132,
                     "peak_bf16_tflops": 989.4, "hbm_gbps": 3350})
        links += [{"a": f"gpu{g}", "b": f"{p}sw{i // 2}", "kind": "pcie", "pcie_gen": 5, "pcie_width": 16},
                  {"a": f"gpu{g}", "b": f"{p}nvswitch", "kind": "nvlink", "nvlinks": 18, "gbps_per_link": 25}]
    links.append({"a": f"{p}cpu0", "b": f"{p}cpu1", "kind": "smp", "gbps": 96})
    return gpus, nodes, links


def main():
    hosts, out = int(sys.argv[1]), sys.argv[2]
    m = {"schema": "peerplan.machine", "version": 1, "name": f"hgx-h100x8-x{hosts}", "origin": "nominal",
         "description": f"{hosts} nominal HGX H100 hosts, NIC full mesh (bench/make_machine.py)",
         "gpus": [], "nodes": [], "links": [], "p2p": "nvlink_only"}
    for h in range(hosts):
        g, n, l = host(h)
        m["gpus"] += g
        m["nodes"] += n
        m["links"] += l
    for a in range(hosts):
        for b in range(a + 1, hosts):
            m["links"].append({"a": f"h{a}-nic0", "b": f"h{b}-nic0", "kind": "network", "gbps": 50, "latency_us": 5})
    with open(out, "w") as f:
        json.dump(m, f)


if __name__ == "__main__":
    main()
