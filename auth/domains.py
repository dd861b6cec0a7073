"""The names ZAP gives a broker's two ports and a broker-key holder, apart
from the ZAP handler itself (``auth.zap``), whose ``zmq.auth`` thread
brings asyncio with it (~30 ms of a start): a broker without auth, and
the request guard, import only these."""

CLIENT_DOMAIN = "duomq-client"
HA_DOMAIN = "duomq-ha"
BROKER_USER = "broker"        # the User-Id of a peer holding the broker key
