"""`evalkit load --ray ADDRESS --client-hosts N`: an open-loop load sent from N hosts of a Ray cluster.

The coordinator (the `evalkit load` process) plans every point as a one-host run would (the same seeded send times
and requests); each host's client is one long-lived Ray actor, `ClientHost`, pinned to a host of its own by a
placement group (`STRICT_SPREAD`: one bundle a node). Before a point, the coordinator probes each host's clock
(evalkit.load.clock_offset: round trips through Ray), hands the host its share of the sends (request i to host
i mod N) with their absolute times moved onto the host's clock, and the host runs them with evalkit's own client
(kernel-stamped reads, `LoadRunner.send_planned`), judging every answer as one host would. It returns its raw request
lines; the coordinator probes the clocks again, moves each line's absolute stamps onto its own clock with the
estimate of both probings, labels it with its `client_host`, and writes the lines of all hosts merged in send order
into the one run directory, beside `client_hosts.jsonl` (per point and host: where it ran, its requests, the clock
offset, its uncertainty and the shortest round trip). The summary's `client.hosts` is read from those files.

Each actor runs at the coordinator's priority (its niceness), as a one-host client's process and its `--client-procs`
children do: a Ray worker nices itself by Ray's `worker_niceness` (15) when it starts, which under load cost the
hosts' TTFT seconds against one process's milliseconds (issue #54). The actor is started with `RAY_worker_niceness=0`
in its runtime environment (as Ray's own job supervisor is) and sets the coordinator's niceness itself; the niceness it
runs at is recorded (`nice` in client_hosts.jsonl), and one that differs (a host whose raylet runs nicer than the
coordinator, where an unprivileged process may not lower it) is said in one line.

Ray is imported only here, only with `--ray`. The hosts must reach the server at the URL the coordinator was given.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from evalkit.client.chat import ChatClient
from evalkit.client.lag import error_budget
from evalkit.clock import Clock
from evalkit.cluster import connect, import_ray
from evalkit.errors import UsageError
from evalkit.load.clock_offset import ClockJson, ClockOffset, ClockProbe, estimate_offset, on_coordinator_clock
from evalkit.load.metrics import dist
from evalkit.load.records import LoadLine, as_json, as_json_lines
from evalkit.load.runner import PlannedSend, PointRun, open_loop_sends
from evalkit.load.schedule import PointPlan
from evalkit.load.summary_records import HostFigures, HostsBlock
from evalkit.runs.rundir import REQUESTS, RunDir, read_jsonl
from evalkit.stats import percentile

CLIENT_HOSTS = "client_hosts.jsonl"
PROBES = 16  # round trips per host before a point, and again after it
LEAD_S = 1.0  # the first send is this long after planning: time for the slices to reach their hosts
PLACEMENT_TIMEOUT_S = 30.0
# Ray's workers nice themselves by `worker_niceness` (15 by default) when they start; 0 leaves the actor at its
# raylet's priority, from which it takes the coordinator's (ClientHost.__init__)
RUNTIME_ENV = {"env_vars": {"RAY_worker_niceness": "0"}}


class _Where(TypedDict):
    hostname: str
    pid: int
    node_ip: str
    node_id: str
    nice: int


class HostWhere(_Where, total=False):
    """Where a client host's actor runs: host name, pid, node address and id, its niceness (and why it could not
    take the coordinator's)."""

    nice_error: str


class HostLine(TypedDict, total=False):
    """One line of `client_hosts.jsonl`: per point and host, where it ran, its requests and its clock figures."""

    point: int
    client_host: int
    hostname: str
    pid: int
    node_ip: str
    node_id: str
    nice: int
    nice_error: str
    requests: int
    clock: ClockJson
    sends_planned_with_offset_s: float


class ClientHostFailed(UsageError):
    """A client host (its Ray actor or node) was lost mid-point: one line, exit 1 (load runs do not resume)."""

    exit_code = 1


@dataclass(frozen=True)
class HostSpec:
    """What a host's client needs (the API key travels in Ray's messages, in memory, and is never written)."""

    base_url: str
    model: str
    api_key: str | None
    timeout_s: float
    uuid_request_ids: bool = False
    omit_fields: frozenset[str] = frozenset()
    standing_body: tuple[tuple[str, Any], ...] = ()
    nice: int | None = None  # the coordinator's niceness, which the host's actor takes (None: left as Ray starts it)


def niceness() -> int:
    """This process's niceness (-20 .. 19)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


class ClientHost:
    """One host's client, the body of a Ray actor: it tells its clock and sends the slices it is handed."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        self.clock = Clock()
        self.nice_error: str | None = None
        if spec.nice is not None and niceness() != spec.nice:
            try:  # nicer is always allowed; less nice needs the privilege (CAP_SYS_NICE or RLIMIT_NICE)
                os.setpriority(os.PRIO_PROCESS, 0, spec.nice)
            except OSError as e:
                self.nice_error = e.strerror or str(e)

    def where(self) -> HostWhere:
        """The host's name, the actor's pid and the node's address."""
        import ray

        # Ray's own, untyped: typed here, so mypy passes with Ray installed or not (the cluster extra)
        node_ip = cast(Callable[[], str], ray.util.get_node_ip_address)()
        node_id = ray.get_runtime_context().get_node_id()
        out: HostWhere = {
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "node_ip": node_ip,
            "node_id": node_id,
            "nice": niceness(),
        }
        if self.nice_error:
            out["nice_error"] = self.nice_error
        return out

    def now(self) -> float:
        """This host's clock."""
        return self.clock.now()

    def run_slice(self, plan: PointPlan, point_id: int, sends: list[PlannedSend]) -> list[LoadLine]:
        """Send `sends` (times on this host's clock) of point `point_id`; the request lines, stamped on this clock."""
        from evalkit.eventloop import fast_loop

        def work() -> list[LoadLine]:
            with fast_loop():
                return asyncio.run(self._run(plan, point_id, sends))

        # a loop of its own in a thread of its own: Ray's worker thread may have a loop running already
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="client-host") as pool:
            return pool.submit(work).result()

    async def _run(self, plan: PointPlan, point_id: int, sends: list[PlannedSend]) -> list[LoadLine]:
        from evalkit.load.runner import LoadRunner

        spec = self.spec
        client = ChatClient(
            spec.base_url,
            spec.model,
            api_key=spec.api_key,
            clock=self.clock,
            uuid_request_ids=spec.uuid_request_ids,
            omit_fields=spec.omit_fields,
            standing_body=dict(spec.standing_body),
        )
        runner = LoadRunner(None, client, self.clock, spec.timeout_s)
        point = PointRun(point_id, plan)
        try:
            reqs = [plan.request(s.index) for s in sends]  # built before the first send is due
            await runner.send_planned(point, list(zip(reqs, sends)))
        finally:
            runner.close()
            await client.aclose()
        return point.lines


def join_cluster(address: str, count: int) -> None:
    """Join the Ray cluster at `address` and check that it has `count` nodes, before the run directory exists; one
    line (exit 2) naming what is missing. The connection stays for `RayClientHosts.start`."""
    ray = import_ray()
    connect(ray, address)
    alive = sum(1 for n in ray.nodes() if n.get("Alive"))
    if alive < count:
        ray.shutdown()
        raise UsageError(
            f"--client-hosts {count}: the Ray cluster at {address} has {alive} node(s); each client host is a node "
            "of its own (ray start on each), or ask for fewer"
        )


class RayClientHosts:
    """The coordinator's side: N `ClientHost` actors on N nodes, and `run_point` with a one-host runner's shape."""

    def __init__(self, ray: Any, group: Any, actors: list[Any], where: list[HostWhere], clock: Clock) -> None:
        self._ray, self._group, self.actors, self.where, self.clock = ray, group, actors, where, clock
        self.rundir: RunDir | None = None

    @classmethod
    def start(
        cls, address: str, count: int, spec: HostSpec, clock: Clock, say: Callable[[str], None] | None = None
    ) -> RayClientHosts:
        """Join the cluster, place one actor on each of `count` nodes, or one line saying why not."""
        ray = import_ray()
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if not ray.is_initialized():
            join_cluster(address, count)
        try:
            group = placement_group([{"CPU": 1}] * count, strategy="STRICT_SPREAD")
            if not group.wait(timeout_seconds=PLACEMENT_TIMEOUT_S):
                remove_placement_group(group)
                raise UsageError(
                    f"--client-hosts {count}: the Ray cluster at {address} could not give {count} nodes a CPU each "
                    f"within {PLACEMENT_TIMEOUT_S:g} s (another job holds their CPUs?); free them, or ask for fewer"
                )
            actor = ray.remote(num_cpus=1, max_restarts=0)(ClientHost)
            nice = niceness()  # a one-host client's priority: the actors take it (ClientHost.__init__)
            actors = [
                actor.options(
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        placement_group=group, placement_group_bundle_index=i
                    ),
                    runtime_env=RUNTIME_ENV,
                ).remote(dataclasses.replace(spec, nice=nice))
                for i in range(count)
            ]
            where = ray.get([a.where.remote() for a in actors])
        except BaseException:
            ray.shutdown()
            raise
        hosts = cls(ray, group, actors, where, clock)
        if say is not None:
            names = ", ".join(f"{w['hostname']} ({w['node_ip']})" for w in where)
            say(f"load: {count} client hosts on Ray at {address}: {names}")
            for h, w in enumerate(where):
                if w.get("nice") != nice:
                    say(
                        f"warning: client host {h} ({w['hostname']}) runs at nice {w.get('nice')}, the coordinator at "
                        f"{nice} ({w.get('nice_error') or 'not set'}): under load its stamps are read later than a "
                        "one-host client's; start its raylet at the coordinator's niceness"
                    )
        return hosts

    def close(self) -> None:
        """Let the actors and their placement go, and leave the cluster."""
        from ray.util.placement_group import remove_placement_group

        try:
            for a in self.actors:
                self._ray.kill(a)
            remove_placement_group(self._group)
        finally:
            self._ray.shutdown()

    def _probe(self, hosts: list[int]) -> tuple[dict[int, list[ClockProbe]], dict[int, BaseException]]:
        """`PROBES` round trips to each of `hosts`, one host after another (a blocking call: run in a thread); the
        probes of each host that answered, and the error of each that did not."""
        out: dict[int, list[ClockProbe]] = {}
        lost: dict[int, BaseException] = {}
        for h in hosts:
            probes = []
            try:
                for _ in range(PROBES):
                    sent = self.clock.now()
                    remote = self._ray.get(self.actors[h].now.remote())
                    probes.append(ClockProbe(sent, float(remote), self.clock.now()))
            except self._ray.exceptions.RayError as e:
                lost[h] = e
                continue
            out[h] = probes
        return out, lost

    def _failed(self, lost: dict[int, BaseException], when: str, kept: str) -> ClientHostFailed:
        h, e = next(iter(lost.items()))
        cause = getattr(e, "cause", None)  # a RayTaskError carries what the host raised
        text = (f"{type(cause).__name__}: {cause}" if cause is not None else str(e)).strip()
        return ClientHostFailed(
            f"load: client host {h} ({self.where[h]['hostname']}, {self.where[h]['node_ip']}) failed {when} "
            f"({text.splitlines()[0] if text else type(e).__name__}); {kept}; load runs do not resume: add --fresh "
            "to measure again"
        )

    async def run_point(self, point: PointRun) -> PointRun:
        """Run one open-loop point from the hosts; `point.lines` are every host's lines on this clock, in send
        order, also appended to the run's requests.jsonl (and the clock figures to client_hosts.jsonl). A host lost
        mid-point ends the run (`ClientHostFailed`) after the other hosts' lines of the point are written."""
        loop = asyncio.get_running_loop()
        n = len(self.actors)
        before, lost = await loop.run_in_executor(None, self._probe, list(range(n)))
        if lost:
            raise self._failed(lost, "before the point", "no request of the point was sent")
        offsets = {h: estimate_offset(p) for h, p in before.items()}
        sends = open_loop_sends(point.plan, self.clock.now() + LEAD_S)
        refs = [
            actor.run_slice.remote(
                point.plan,
                point.point_id,
                [dataclasses.replace(s, at=offsets[h].to_host(s.at)) for s in sends if s.index % n == h],
            )
            for h, actor in enumerate(self.actors)
        ]
        results = await asyncio.gather(*refs, return_exceptions=True)
        done: dict[int, list[LoadLine]] = {}
        for h, r in enumerate(results):
            if isinstance(r, self._ray.exceptions.RayError):
                lost[h] = r
            elif isinstance(r, BaseException):
                raise r
            else:
                done[h] = r
        # probed again: a host lost after its lines came back keeps them, on the probes before the point
        after, _ = await loop.run_in_executor(None, self._probe, list(done))
        merged: list[LoadLine] = []
        figures = []
        for h, lines in done.items():
            est = estimate_offset(before[h] + after.get(h, []))
            for ln in lines:
                moved = on_coordinator_clock(ln, est)
                moved["client_host"] = h
                merged.append(moved)
            figures.append(_host_line(point.point_id, h, self.where[h], lines, est, offsets[h]))
        merged.sort(key=lambda ln: (ln["scheduled_send"], ln["index"]))
        point.lines.extend(merged)
        if self.rundir is not None:
            await loop.run_in_executor(None, _write, self.rundir, merged, figures)
        if lost:
            raise self._failed(lost, "mid-point", f"the other hosts' {len(merged)} requests of the point are written")
        return point


def _host_line(
    point: int, host: int, where: HostWhere, lines: list[LoadLine], est: ClockOffset, sent_on: ClockOffset
) -> HostLine:
    return {
        "point": point,
        "client_host": host,
        **where,
        "requests": len(lines),
        "clock": est.to_json(),
        "sends_planned_with_offset_s": sent_on.offset_s,
    }


def _write(rundir: RunDir, lines: list[LoadLine], figures: list[HostLine]) -> None:
    for ln in lines:
        rundir.append(REQUESTS, as_json(ln))
    for f in figures:
        rundir.append(CLIENT_HOSTS, as_json(f))


def hosts_summary(path: Path, measured: list[LoadLine]) -> HostsBlock:
    """`hosts`, `clock_uncertainty_s` and `timeline_error_budget_s` of a run's `client` block when it was sent from
    several hosts (an empty dict otherwise): per host its measured requests, send lateness, read lag, error budget
    and the clock figures of every point (the largest uncertainty counts); the timeline budget is the run's error
    budget plus the largest clock uncertainty, the most an absolute stamp of the merged timeline may be off."""
    if not (path / CLIENT_HOSTS).is_file():
        return {}
    figures = cast(list[HostLine], read_jsonl(path / CLIENT_HOSTS))
    hosts: list[HostFigures] = []
    for h in sorted({int(f["client_host"]) for f in figures}):
        mine = [f for f in figures if int(f["client_host"]) == h]
        lines = [ln for ln in measured if ln.get("client_host") == h]
        lags = [lag for ln in lines if isinstance(lag := ln.get("read_lag_s"), (int, float))]
        clocks = [f["clock"] for f in mine]
        hosts.append(
            {
                "client_host": h,
                "hostname": mine[-1].get("hostname"),
                "node_ip": mine[-1].get("node_ip"),
                "requests": len(lines),
                "send_lateness_s": dist(ln.get("send_lateness_s") for ln in lines),
                "read_lag_p99_s": percentile(lags, 99) if lags else None,
                "error_budget_s": error_budget(as_json_lines(lines))["error_budget_s"],
                "clock_offset_s": [c["offset_s"] for c in clocks],
                "clock_uncertainty_s": max(c["uncertainty_s"] for c in clocks),
                "round_trip_s": min(c["round_trip_s"] for c in clocks),
                "clock_consistent": all(c.get("consistent", True) for c in clocks),
            }
        )
    uncertainty = max(h["clock_uncertainty_s"] for h in hosts) if hosts else None
    budget = error_budget(as_json_lines(measured))["error_budget_s"]
    return {
        "hosts": hosts,
        "clock_uncertainty_s": uncertainty,
        "timeline_error_budget_s": None if budget is None or uncertainty is None else budget + uncertainty,
    }


def host_spec(client: Any, api_key: str | None, timeout_s: float) -> HostSpec:
    """The spec of a host's client, from the coordinator's own (`ChatClient` or its multi-process twin)."""
    return HostSpec(
        client.base_url,
        client.model,
        api_key,
        timeout_s,
        bool(client.uuid_request_ids),
        frozenset(client.omit_fields),
        tuple(dict(client.standing_body).items()),
    )
