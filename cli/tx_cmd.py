"""``duomq tx list [--group G]``: the transactions pending on every broker
group's master, with their age and check-backs; ``duomq tx resolve ID
--commit|--rollback``: an operator ends one (needs ``Cluster:<cluster>:Admin``
on a secured cluster)."""

from __future__ import annotations

from duomq.cli.common import add_endpoint, add_json, emit, endpoint, table
from duomq.common.errors import BadRequestError
from duomq.common.message import make_msg_id
from duomq.common.transaction import parse_transaction_id_epoch
from duomq.proto import pb


def add(sub) -> None:
    p = sub.add_parser("tx", help="pending transactions: list them, end one")
    verbs = p.add_subparsers(dest="verb", required=True)
    q = verbs.add_parser("list", help="the transactions pending on each broker group's "
                                      "master, oldest first")
    q.add_argument("--group", default="", help="only this producer group's")
    q.add_argument("--max", type=int, default=1000, help="most per broker group (1000)")
    q.set_defaults(func=list_)
    r = verbs.add_parser("resolve", help="commit or roll back a pending transaction")
    r.add_argument("id", metavar="ID", help="the transaction's id (its half message's id)")
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--commit", action="store_true")
    how.add_argument("--rollback", action="store_true")
    r.set_defaults(func=resolve)
    for x in (q, r):
        add_endpoint(x)
        add_json(x)


def _client(args):
    from duomq.client import PullConsumer
    zookeeper, cluster = endpoint(args)
    return PullConsumer("duomq-admin", zookeeper=zookeeper, cluster=cluster)


def list_(args) -> int:
    from duomq.client.base import raise_for
    rows, pending = [], {}
    with _client(args) as c:
        masters = sorted((b.group, b.address) for b in c.registered_brokers()
                         if b.is_master and b.address)
        for group, address in masters:
            status, error, resp = c.remoting.call(
                address, pb.LIST_TRANSACTIONS,
                pb.ListTransactionsRequest(producer_group=args.group, max=args.max), 10)
            raise_for(status, error)
            pending[group] = resp.pending
            rows += [{"transaction_id": t.transaction_id, "producer_group": t.producer_group,
                      "topic": t.topic, "keys": t.keys, "age_s": round(t.age_ms / 1000, 1),
                      "checks": t.checks, "broker_group": group} for t in resp.transactions]
    if args.json:
        emit({"transactions": rows, "pending": pending})
        return 0
    if rows:
        print(table([[r["transaction_id"], r["producer_group"], r["topic"], r["keys"],
                      r["age_s"], r["checks"]] for r in rows],
                    ["transaction", "producer group", "topic", "keys", "age s", "checks"]))
    print(f"{sum(pending.values())} pending transaction(s)"
          + "".join(f"; {g}: {n}" for g, n in pending.items()))
    return 0


def _end_request(offset: int, action: pb.TransactionAction, epoch: int | None
                 ) -> pb.EndTransactionRequest:
    req = pb.EndTransactionRequest(half_offset=offset, action=action)
    if epoch is not None:                # the broker checks the half is of that epoch
        req.half_epoch = epoch
    return req


def resolve(args) -> int:
    from duomq.client.base import raise_for
    from duomq.client.producer.transaction import UNCONFIRMED
    try:
        group, offset, epoch = parse_transaction_id_epoch(args.id)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    action = pb.COMMIT if args.commit else pb.ROLLBACK
    with _client(args) as c:
        status, error, resp = c.remoting.call(
            c.master_address(group), pb.END_TRANSACTION,
            _end_request(offset, action, epoch), 30)
        if status not in (pb.OK, pb.SLAVE_NOT_AVAILABLE, *UNCONFIRMED):   # ended, if not yet
            raise_for(status, error)                                    # durable as a send
    done = "committed" if args.commit else "rolled back"
    out = {"transaction_id": args.id, "result": f"already {done}" if resp.already else done,
           "warning": error if status != pb.OK else ""}
    if args.commit and not resp.already:
        out.update(topic=resp.topic, queue=resp.queue_id,
                   msg_id=make_msg_id(group, resp.physical_offset, resp.epoch))
    if args.json:
        emit(out)
    else:
        print(f"{args.id}: {out['result']}" + (f" to {out['topic']}#{out['queue']} as "
                                                f"{out['msg_id']}" if "msg_id" in out else "")
              + (f" ({out['warning']})" if out["warning"] else ""))
    return 0
