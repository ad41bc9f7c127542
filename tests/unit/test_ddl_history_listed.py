"""Which outcomes of a DDL the history already lists, from its entries (pure logic of ddl_history)."""

from ingest.state.ddl_history import APPLIED, RECORDED, REJECTED, SKIPPED, listed_ranks

ADD = "ALTER TABLE `t` ADD COLUMN `c` int"


def test_a_refusal_ranks_below_every_other_outcome_and_the_highest_listed_counts():
    ranks = listed_ranks(
        [
            ("app.t", 100, ADD, REJECTED),
            ("app.u", 100, ADD, REJECTED),
            ("app.u", 100, ADD, APPLIED),
            ("app.v", 100, ADD, SKIPPED),
            ("app.w", 100, ADD, RECORDED),
        ]
    )
    assert ranks[("app.t", 100, ADD)] < ranks[("app.u", 100, ADD)]
    assert ranks[("app.u", 100, ADD)] == ranks[("app.v", 100, ADD)] == ranks[("app.w", 100, ADD)]


def test_a_statement_is_one_entry_whatever_its_whitespace_and_commit_ts_and_table_tell_entries_apart():
    ranks = listed_ranks(
        [
            ("app.t", 100, "ALTER TABLE  `t`\n ADD COLUMN `c` int", APPLIED),
            ("app.t", 101, ADD, APPLIED),
            ("app.u", 100, ADD, APPLIED),
        ]
    )
    assert set(ranks) == {("app.t", 100, ADD), ("app.t", 101, ADD), ("app.u", 100, ADD)}
