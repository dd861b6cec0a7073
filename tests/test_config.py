import pytest

from duomq.common.client_config import ConsumerConfig, ProducerConfig
from duomq.common.config import BrokerConfig, FlushDiskType, ReplicationMode
from duomq.common.errors import ConfigError, InvalidNameError
from duomq.common.names import validate_name


def test_defaults_match_the_documented_values():
    c = BrokerConfig()
    assert (c.flush, c.sync_flush_timeout_ms, c.flush_interval_ms, c.flush_least_pages,
            c.flush_thorough_interval_ms) == (FlushDiskType.ASYNC_FLUSH, 5000, 500, 4, 10000)
    assert (c.segment_size_bytes, c.max_message_bytes, c.long_polling_timeout_ms,
            c.file_reserved_hours) == (1 << 30, 4 << 20, 15000, 72)
    assert ProducerConfig().send_timeout_ms == 10000
    assert ProducerConfig().retry_times_when_send_failed == 2
    assert ConsumerConfig().offset_commit_interval_ms == 5000
    assert (ConsumerConfig().allocate_strategy, ConsumerConfig().rebalance_interval_ms) == \
        ("average", 20000)


@pytest.mark.parametrize("kwargs,field", [
    ({"segment_size_bytes": 1024, "max_message_bytes": 4096, "max_pull_bytes": 4096},
     "segment_size_bytes"),
    ({"max_pull_bytes": 10}, "max_pull_bytes"),
    ({"flush_interval_ms": 0}, "flush_interval_ms"),
    ({"flush": "SOMETIMES"}, "flush"),
    ({"port": 70000}, "port"),
    ({"group": "bad name"}, "broker group"),
    ({"flush_thorough_interval_ms": 100}, "flush_thorough_interval_ms"),
    ({"ha_apply_nice": -1}, "ha_apply_nice"),
    ({"ha_apply_nice": 20}, "ha_apply_nice"),
    ({"busy_poll_us": -1}, "busy_poll_us"),
    ({"busy_poll_us": 10_001}, "busy_poll_us"),
    ({"ha_linger_ms": -1}, "ha_linger_ms"),
    ({"ha_linger_ms": 101}, "ha_linger_ms"),
    ({"housekeeping_interval_ms": 0}, "housekeeping_interval_ms"),
    ({"housekeeping_interval_ms": 501}, "housekeeping_interval_ms"),   # ha_heartbeat_ms 1000
    ({"client_transport": "tcp"}, "client_transport"),
    ({"client_transport": "native", "auth": True, "auth_dir": "/x"}, "client_transport"),
    ({"ha_transport": "udp"}, "ha_transport"),
    ({"ha_transport": "native", "auth": True, "auth_dir": "/x"}, "ha_transport"),
])
def test_contradictory_broker_config_is_refused_naming_the_field(kwargs, field):
    with pytest.raises((ConfigError, InvalidNameError), match=field):
        BrokerConfig(**kwargs)


def test_the_client_port_is_native_unless_secured():
    assert BrokerConfig().native_client_port
    assert not BrokerConfig(client_transport="zeromq").native_client_port
    assert not BrokerConfig(auth=True, auth_dir="/x").native_client_port   # CURVE is libzmq's
    assert BrokerConfig().native_ha_port and BrokerConfig(ha_transport="native").native_ha_port
    assert not BrokerConfig(ha_transport="zeromq").native_ha_port
    assert not BrokerConfig(auth=True, auth_dir="/x").native_ha_port


def test_flush_aliases():
    assert BrokerConfig(flush="sync").flush is FlushDiskType.SYNC_FLUSH
    assert BrokerConfig(flush="ASYNC_FLUSH").flush is FlushDiskType.ASYNC_FLUSH


def test_send_timeout_must_exceed_broker_waits():
    sync = BrokerConfig(flush="SYNC_FLUSH", replication="SYNC")
    assert sync.max_ack_wait_ms == 8000
    ProducerConfig(send_timeout_ms=9000).check_broker("g", 8000)
    with pytest.raises(ConfigError, match="send_timeout_ms"):
        ProducerConfig(send_timeout_ms=5000).check_broker("g", 8000)


def test_load_file_env_and_overrides(tmp_path):
    f = tmp_path / "b.toml"
    f.write_text('group = "g1"\nport = 1234\nflush = "SYNC_FLUSH"\n')
    c = BrokerConfig.load(str(f), env={"DUOMQ_PORT": "2345", "DUOMQ_FILE_RESERVED_HOURS": "1.5"},
                          overrides={"broker_id": 3})
    assert (c.group, c.port, c.broker_id, c.file_reserved_hours) == ("g1", 2345, 3, 1.5)
    f.write_text('grup = "typo"\n')
    with pytest.raises(ConfigError, match="grup"):
        BrokerConfig.load(str(f), env={})
    with pytest.raises(ConfigError, match="DUOMQ_PORT"):
        BrokerConfig.load(None, env={"DUOMQ_PORT": "many"})


def test_group_tables_layer_over_the_broker_table(tmp_path):
    f = tmp_path / "duomq.toml"
    f.write_text('[broker]\ncluster = "prod"\nflush = "SYNC_FLUSH"\nreplication = "SYNC"\n'
                 '[groups.broker-b]\nreplication = "ASYNC"\nflush = "ASYNC_FLUSH"\n')
    a = BrokerConfig.load(str(f), env={"DUOMQ_POD_NAME": "broker-a-1"})
    b = BrokerConfig.load(str(f), env={"DUOMQ_POD_NAME": "broker-b-0"})
    assert (a.cluster, a.group, a.broker_id, a.replication, a.flush) == \
        ("prod", "broker-a", 1, ReplicationMode.SYNC, FlushDiskType.SYNC_FLUSH)
    assert (b.cluster, b.group, b.broker_id, b.replication, b.flush) == \
        ("prod", "broker-b", 0, ReplicationMode.ASYNC, FlushDiskType.ASYNC_FLUSH)
    # the environment still wins over the group's table
    b2 = BrokerConfig.load(str(f), env={"DUOMQ_GROUP": "broker-b", "DUOMQ_FLUSH": "SYNC_FLUSH"})
    assert (b2.replication, b2.flush) == (ReplicationMode.ASYNC, FlushDiskType.SYNC_FLUSH)
    for bad, match in (('[groups.broker-b]\nbroker_id = 1\n', "cannot move"),
                       ('[groups.broker-b]\nreplicaton = "SYNC"\n', "replicaton"),
                       ('[groups."bad name"]\nport = 1\n', "bad name"),
                       ('[broker]\n[groups]\nbroker-b = 3\n', "not a table")):
        f.write_text(bad)
        with pytest.raises((ConfigError, InvalidNameError), match=match):
            BrokerConfig.load(str(f), env={})


@pytest.mark.parametrize("name", ["", "a" * 128, "with space", "slash/", "%RETRY%g", "%DLQ%g", "é"])
def test_bad_names(name):
    with pytest.raises(InvalidNameError):
        validate_name("topic", name)


def test_system_names_only_when_allowed():
    assert validate_name("topic", "%RETRY%grp", allow_system=True) == "%RETRY%grp"
    assert validate_name("topic", "Orders_2024-x") == "Orders_2024-x"


def test_slave_flush_defaults_to_flush():
    assert BrokerConfig(flush="SYNC_FLUSH").slave_flush is FlushDiskType.SYNC_FLUSH
    assert BrokerConfig(flush="SYNC_FLUSH", slave_flush="ASYNC_FLUSH").slave_flush \
        is FlushDiskType.ASYNC_FLUSH
    with pytest.raises(ConfigError, match="slave_flush"):
        BrokerConfig(slave_flush="SOMETIMES")


@pytest.mark.parametrize("kwargs,message", [
    ({"port": "abc"}, "port: 'abc' is not a valid int"),
    ({"promotable": "no"}, "promotable: 'no' is not a valid bool"),
    ({"promotable": 0}, "promotable: 0 is not a valid bool"),
    ({"port": True}, "port: True is not a valid int"),
    ({"election_settle_ms": -1}, "election_settle_ms: must be >= 0, got -1"),
    ({"file_reserved_hours": "72"}, "file_reserved_hours: '72' is not a valid float"),
    ({"data_dir": 5}, "data_dir: 5 is not a valid str"),
])
def test_every_field_holds_its_type_and_no_number_is_negative(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(**kwargs)
    assert BrokerConfig(file_reserved_hours=1).file_reserved_hours == 1


def test_producer_and_consumer_fields_are_typed_too():
    with pytest.raises(ConfigError, match="send_timeout_ms: '5' is not a valid int"):
        ProducerConfig(send_timeout_ms="5")
    with pytest.raises(ConfigError, match="consume_timestamp_ms: must be >= 0"):
        ConsumerConfig(consume_timestamp_ms=-5)
    with pytest.raises(ConfigError, match="consume_threads: must be >= 0"):
        ConsumerConfig(consume_threads=-1)
    assert ConsumerConfig(consume_threads=0).consume_threads == 0   # the I/O thread runs it


def test_a_toml_string_where_a_bool_belongs_is_refused(tmp_path):
    f = tmp_path / "b.toml"
    f.write_text('[broker]\npromotable = "no"\n')
    with pytest.raises(ConfigError, match="promotable: 'no' is not a valid bool"):
        BrokerConfig.load(str(f), env={})


@pytest.mark.parametrize("text", ["no", "yes", "maybe", ""])
def test_text_booleans_are_true_false_1_or_0(text):
    with pytest.raises(ConfigError, match=r"DUOMQ_PROMOTABLE: .* \(true or false\)"):
        BrokerConfig.load(None, env={"DUOMQ_PROMOTABLE": text})
    assert BrokerConfig.load(None, env={"DUOMQ_PROMOTABLE": "FALSE"}).promotable is False
    assert BrokerConfig.load(None, env={"DUOMQ_PROMOTABLE": "1"}).promotable is True


def test_a_huge_name_is_refused_without_being_echoed():
    with pytest.raises(InvalidNameError) as exc:
        validate_name("topic", "%RETRY%" + "x" * 1_000_000)
    assert len(str(exc.value)) < 200 and "1000007 characters" in str(exc.value)


def test_a_name_remembered_as_valid_is_remembered_for_its_own_rules_only():
    """validate_name remembers the names it accepted: a name accepted under
    one set of rules is still refused under stricter ones, and a refused name
    is refused every time, whatever was asked before."""
    from duomq.common.errors import InvalidNameError
    from duomq.common.names import SCHEDULE_TOPIC, validate_name
    assert validate_name("topic", "%RETRY%g1", allow_system=True) == "%RETRY%g1"
    assert validate_name("topic", SCHEDULE_TOPIC, internal=True) == SCHEDULE_TOPIC
    for _ in range(2):
        with pytest.raises(InvalidNameError, match="reserved prefix"):
            validate_name("topic", "%RETRY%g1")
        with pytest.raises(InvalidNameError, match="broker's own use"):
            validate_name("topic", SCHEDULE_TOPIC)
        with pytest.raises(InvalidNameError, match="invalid"):
            validate_name("topic", "bad name")
    with pytest.raises(InvalidNameError, match="must be a string"):
        validate_name("topic", ["T"])                 # not hashable: checked, not remembered


def test_an_external_address_is_its_host_and_the_port_unless_given():
    import pytest as _pytest

    from duomq.common.config import BrokerConfig
    from duomq.common.errors import ConfigError
    assert BrokerConfig().external_address == ""
    cfg = BrokerConfig(port=10911, external_host="mq-a0.example.com")
    assert cfg.external_address == "tcp://mq-a0.example.com:10911"
    assert BrokerConfig(external_host="lb", external_port=31000).external_address == \
        "tcp://lb:31000"
    for bad in ({"external_port": 31000}, {"external_host": "lb", "external_port": 70000}):
        with _pytest.raises(ConfigError, match="external_port"):
            BrokerConfig(**bad)
