"""A confirmed booking handed to the scheduler the provider runs. Renders only (text out).

* Slurm: an advance reservation of the booked nodes for the booked window, and the matching job line.
  ``scontrol create reservation ReservationName=... StartTime=YYYY-MM-DDTHH:MM:SS Duration=<minutes> Nodes=...
  Users=...`` and ``sbatch --reservation=<name>`` (Slurm, "Advanced Resource Reservation Guide",
  https://slurm.schedmd.com/reservations.html: "Reservation Creation" and "Reservation Use"; Duration in minutes,
  ``UNLIMITED`` for an ongoing booking). A reservation holds whole nodes; the job line asks for the booked GPUs per
  node (``--gres=gpu:N``). Bookings are in UTC, and ``StartTime`` takes no zone: its documented forms (scontrol(1),
  "StartTime=<time_spec>" under RESERVATIONS - SPECIFICATIONS FOR CREATE, UPDATE, https://slurm.schedmd.com/
  scontrol.html) are all local times, and scontrol reads it on the client with ``parse_time`` (SchedMD/slurm
  src/scontrol/create_res.c:212 @284c3b95), which ends in ``slurm_mktime`` -> ``mktime`` (src/common/slurm_time.c:
  44-49), the client's local time zone. So the command runs under ``TZ=UTC0`` (POSIX TZ: zone UTC, offset 0; no
  zoneinfo file needed), which makes that local time UTC. A reservation names who may use it: scontrol refuses one
  with none of Users, Groups, AllowedPartitions, QOS or Accounts ("Either Users/Groups, AllowedPartitions, QOS and/or
  Accounts must be specified.  No reservation created.": ``validate_resv_create_desc``, SchedMD/slurm
  src/common/slurm_protocol_defs.c:6919-6927 @284c3b95, called by src/scontrol/create_res.c:422), so the export
  needs ``--user`` (Users=) or ``--account`` (Accounts=) and refuses neither (:func:`slurm_principals`); the other
  formats have neither field and refuse both (:func:`refuse_unused_principals`).
* Kueue: a ResourceFlavor for the device type, a ClusterQueue whose ``nominalQuota`` of ``nvidia.com/gpu`` is the
  booked count, and a LocalQueue in the team's namespace (kueue.x-k8s.io/v1beta1; kubernetes-sigs/kueue
  site/content/en/docs/concepts/cluster_queue.md, resource_flavor.md, local_queue.md). Kueue has no calendar: the
  queue admits from when it exists, so create it at the booking's start and delete it at its end. The ClusterQueue
  covers ``cpu`` and ``memory`` too, at the booked nodes' cpus and RAM from the inventory: Kueue leaves a pod that
  requests a resource no resource group covers pending ("resource cpu unavailable in ClusterQueue",
  ``findFlavorForPodSetResource``, kubernetes-sigs/kueue pkg/scheduler/flavorassigner/flavorassigner.go), and every
  serving or training pod requests cpu and memory. Its ``namespaceSelector`` admits the team's namespace only, by the
  ``kubernetes.io/metadata.name`` label the control plane sets on every namespace (Kubernetes "Well-Known Labels,
  Annotations and Taints"; GA in 1.22): an empty selector (``{}``) would let every namespace's LocalQueue use the
  booked devices (cluster_queue.md "Namespace selector").
* OpenStack Blazar: a host lease on the booked hosts for the window (``openstack reservation lease create
  --reservation resource_type=physical:host,min=N,max=N,hypervisor_properties=... --start-date "YYYY-MM-DD HH:MM"
  --end-date ... NAME``; Blazar "Host Reservation", https://docs.openstack.org/blazar/latest/cli/host-reservation.html;
  the dates as in the Reservation API, CCYY-MM-DD hh:mm).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import shlex
from dataclasses import dataclass

from ..errors import InputError
from .placement import ONGOING_END, crossing, moment_after

FORMATS = ("slurm", "kueue", "blazar")


@dataclass(frozen=True)
class Handover:
    """What a scheduler needs of one booking."""

    id: str
    job: str
    start: _dt.datetime
    end: _dt.datetime
    nodes: tuple[str, ...]
    devices_per_node: int
    device: str
    team: str | None = None
    user: str | None = None
    copy_nodes: int | None = None  # the machines one copy of the model spans (store schema 6; None: before it)
    account: str | None = None  # Slurm Accounts= (the reservation's users by account; Users= by name: ``user``)
    cpus: int = 0  # the booked nodes' cpus, summed (the inventory's; 0: not known)
    ram: int = 0  # the booked nodes' host RAM [bytes], summed (the inventory's; 0: not known)

    @property
    def span_note(self) -> str:
        """A comment line for a booking whose one copy spans machines (what crosses between them in placement.py
        :func:`crossing`'s words; a booking records the machines a copy spans, not its tensor-parallel layout): its
        nodes were placed on one fabric (placement.py ``JobNeed.one_fabric``) and must run together; empty
        otherwise."""
        if (self.copy_nodes or 1) <= 1:
            return ""
        return (f"# one copy of the model spans {self.copy_nodes} machines ({crossing(None)}): the booked "
                "nodes share one fabric; run the copy on them together\n")

    @property
    def name(self) -> str:
        return f"llmsizer-{_slug(self.job)}-{self.id}"

    @property
    def ongoing(self) -> bool:
        return self.end >= ONGOING_END


def _slug(text: str) -> str:
    """A DNS-1123 label piece: lower case, digits and '-' (Kubernetes names)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40] or "x"


def arg(value: object) -> str:
    """One value written into a generated shell command, quoted for a POSIX shell (``shlex.quote``: a word of
    safe characters as it is, anything else in single quotes), so that the line runs as exactly the command it
    shows whatever a user, node or job name holds (``--user 'bob;rm -rf ~'``, a newline): every exporter writes
    its command's values through here."""
    return shlex.quote(str(value))


def slurm_principals(user: str | None, account: str | None) -> str:
    """The reservation's ``Users=`` and ``Accounts=`` words (module docstring: scontrol creates none without one of
    them); neither given: one line naming the flags."""
    if not user and not account:
        raise InputError("a Slurm reservation names who may use it: give --user (Users=) or --account (Accounts=); "
                         "scontrol refuses one with neither (\"Either Users/Groups, AllowedPartitions, QOS and/or "
                         "Accounts must be specified\")")
    return "".join(f" {arg(f'{key}={value}')}" for key, value in (("Users", user), ("Accounts", account)) if value)


def slurm(h: Handover) -> str:
    minutes = "UNLIMITED" if h.ongoing else str(math.ceil((h.end - h.start).total_seconds() / 60))
    users = slurm_principals(h.user, h.account)
    return (h.span_note + "# times in UTC; TZ=UTC0 makes scontrol read StartTime as UTC "
            "(it reads local time and takes no zone)\n"
            f"TZ=UTC0 scontrol create reservation {arg(f'ReservationName={h.name}')} "
            f"{arg(f'StartTime={h.start:%Y-%m-%dT%H:%M:%S}')} {arg(f'Duration={minutes}')} "
            f"{arg('Nodes=' + ','.join(h.nodes))}{users}\n"
            f"sbatch {arg(f'--reservation={h.name}')} {arg(f'--nodes={len(h.nodes)}')} "
            f"{arg(f'--gres=gpu:{h.devices_per_node}')} JOB_SCRIPT\n")


#: Kubernetes sets this label on every namespace to the namespace's name (module docstring)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def kueue_host_quota(h: Handover) -> tuple[int, int]:
    """(cpu, memory bytes) the ClusterQueue covers beside the GPUs: the booked nodes' (module docstring); one line
    naming the inventory keys when the inventory does not give them (the CLI refuses a missing --inventory before:
    capacity_cmd._booked_host)."""
    if h.cpus <= 0 or h.ram <= 0:
        missing = " and ".join(w for w, v in (("cpus", h.cpus), ("ram", h.ram)) if v <= 0)
        raise InputError(f"a Kueue ClusterQueue must cover the cpu and memory its pods request (Kueue leaves a pod "
                         f"asking for a resource it does not cover pending: \"resource cpu unavailable in "
                         f"ClusterQueue\"): the inventory gives no {missing} for the booked node(s) "
                         f"{', '.join(h.nodes)}; add them to its nodes")
    return h.cpus, h.ram


def kueue(h: Handover) -> str:
    cpus, ram = kueue_host_quota(h)
    flavor = _slug(h.device)
    queue = _slug(h.name)
    ns = _slug(h.team or "default")
    total = h.devices_per_node * len(h.nodes)
    until = "until released" if h.ongoing else f"{h.end:%Y-%m-%d %H:%M} UTC"
    return h.span_note + f"""# booking {h.id} ({h.job}): {total} x {h.device} on {', '.join(h.nodes)}, {h.start:%Y-%m-%d %H:%M} UTC ->
# {until}. Kueue has no calendar: apply at the start, delete the ClusterQueue at the end. Label the booked
# nodes llmsizer.io/device={h.device} so the flavor selects them.
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: {flavor}
spec:
  nodeLabels:
    llmsizer.io/device: {json.dumps(h.device)}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: {queue}
spec:
  namespaceSelector:
    matchLabels:
      {NAMESPACE_NAME_LABEL}: {ns}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: {flavor}
      resources:
      - name: "cpu"
        nominalQuota: {cpus}
      - name: "memory"
        nominalQuota: {ram}
      - name: "nvidia.com/gpu"
        nominalQuota: {total}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: {ns}
  name: {queue}
spec:
  clusterQueue: {queue}
"""


def end_minute(end: _dt.datetime) -> _dt.datetime:
    """``end`` rounded up to the whole minute Blazar's ``--end-date`` takes (``%Y-%m-%d %H:%M``), so a lease never
    ends before its booking does (as the Slurm export's Duration rounds its minutes up; probe23 C4: 01:50:26 was
    written 01:50, 26 s early)."""
    down = end.replace(second=0, microsecond=0)
    return down if down == end else moment_after(down, 60.0, _dt.datetime.max.replace(second=0, microsecond=0))


def blazar(h: Handover) -> str:
    hosts = ", ".join(json.dumps(n) for n in h.nodes)
    props = f'["in", "$hypervisor_hostname", {hosts}]'
    end = h.end
    note = ""
    if h.ongoing:
        end = moment_after(h.start, 365 * 86400.0, _dt.datetime.max)  # a stored start near the calendar's end
        note = ("# ongoing booking: a Blazar lease needs an end date; this one ends after a year: extend it with "
                "`openstack reservation lease update --prolong-for` before then\n")
    n = len(h.nodes)
    reservation = f"resource_type=physical:host,min={n},max={n},hypervisor_properties={props}"
    return (h.span_note + note + f"openstack reservation lease create --reservation {arg(reservation)} "
            f"--start-date {arg(f'{h.start:%Y-%m-%d %H:%M}')} --end-date {arg(f'{end_minute(end):%Y-%m-%d %H:%M}')} "
            f"{arg(h.name)}\n")


def refuse_unused_principals(fmt: str, account: str | None, user: str | None = None) -> None:
    """--user and --account name a Slurm reservation's users (Users=, Accounts=: :func:`slurm_principals`); the Kueue
    and Blazar exports have no such field, so either given there is refused in one line rather than silently dropped
    (review31 N5, fixes23). Kueue admits by namespace, not by user: a ClusterQueue's ``namespaceSelector`` and the
    LocalQueue's namespace (kubernetes-sigs/kueue site/content/en/docs/concepts/cluster_queue.md "Namespace
    selector", local_queue.md). A Blazar lease belongs to the project of the token that creates it: ``openstack
    reservation lease create`` takes the name, --start-date, --end-date, --before-end-date, --reservation, --event
    and --physical-reservation, no user or account (openstack/python-blazarclient
    blazarclient/v1/shell_commands/leases.py:109-156, 299-320 @2ecdfac8)."""
    given = [(flag, field) for flag, field, value in (("--user", "Users=", user), ("--account", "Accounts=", account))
             if value]
    if fmt != "slurm" and given:
        flags, fields = " and ".join(f for f, _ in given), ", ".join(f for _, f in given)
        verb, them = ("name", "them") if len(given) > 1 else ("names", "it")
        raise InputError(f"{flags} {verb} a Slurm reservation's users ({fields}); a {fmt} export has no such "
                         f"field: leave {them} out")


def render(h: Handover, fmt: str) -> str:
    refuse_unused_principals(fmt, h.account, h.user)
    return {"slurm": slurm, "kueue": kueue, "blazar": blazar}[fmt](h)
