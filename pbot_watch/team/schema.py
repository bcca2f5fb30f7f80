"""The team index's schema in PostgreSQL: numbered migrations, applied in order, once each.

Unlike the local search index (derived, rebuilt when its version changes), the team index is fed
by many machines and cannot be rebuilt from one of them, so it is migrated: each step is applied
in its own transaction and recorded in ``pbot_migrations``; ``pbot-watch team init`` applies
what is missing, under an advisory lock so two machines initialising at once do not collide.
``docs/team.md`` describes the tables for other tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

LOCK_KEY = 0x70626F74  # "pbot": the advisory lock of migrations

MIGRATIONS: tuple[str, ...] = (
    # 1: records and their nodes, with the indexes literal and terms search use.
    """
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE TABLE pbot_meta(key text PRIMARY KEY, value text NOT NULL);
    INSERT INTO pbot_meta(key, value) VALUES ('instance', gen_random_uuid()::text);
    CREATE TABLE pbot_records(
      record_id text PRIMARY KEY,
      session_id text NOT NULL,
      name text NOT NULL,
      name_json text,
      machine text NOT NULL,
      os_user text NOT NULL,
      workspace text NOT NULL,
      content_hash text NOT NULL,
      pushed_at timestamptz NOT NULL DEFAULT now(),
      pushed_by text NOT NULL
    );
    CREATE INDEX pbot_records_session ON pbot_records(session_id);
    CREATE INDEX pbot_records_workspace ON pbot_records(workspace);
    CREATE TABLE pbot_nodes(
      record_id text NOT NULL REFERENCES pbot_records(record_id) ON DELETE CASCADE,
      id text NOT NULL,
      seq integer NOT NULL,
      kind text NOT NULL,
      level integer NOT NULL,
      from_ text NOT NULL,
      to_ text NOT NULL,
      from_ms double precision,
      to_ms double precision,
      ready boolean NOT NULL,
      completed boolean NOT NULL,
      searchable boolean NOT NULL,
      capped boolean NOT NULL,
      entry_ids jsonb NOT NULL,
      children jsonb NOT NULL,
      parents jsonb NOT NULL,
      text text NOT NULL,
      text_json text,
      text_lower text NOT NULL,
      terms tsvector NOT NULL,
      hash text NOT NULL,
      PRIMARY KEY (record_id, id)
    );
    CREATE INDEX pbot_nodes_literal ON pbot_nodes USING gin (text_lower gin_trgm_ops) WHERE searchable;
    CREATE INDEX pbot_nodes_terms ON pbot_nodes USING gin (terms) WHERE searchable;
    CREATE INDEX pbot_nodes_order ON pbot_nodes(to_ DESC, id) WHERE searchable;
    CREATE INDEX pbot_nodes_sessions ON pbot_nodes(to_ DESC, id) WHERE kind = 'session';
    CREATE INDEX pbot_nodes_by_id ON pbot_nodes(id);
    CREATE INDEX pbot_nodes_capped ON pbot_nodes(record_id) WHERE capped AND searchable;
    """,
    # 2: exact totals of common queries kept as nodes change (``tallies.py``). A tally is a
    # query (a LIKE pattern on ``text_lower``, or a tsquery on ``terms``); every statement that
    # adds or removes nodes adds one row per tally it changes to ``pbot_tally_deltas``
    # (insert-only, so writers never wait for each other on a counter row); the total is the
    # sum of a tally's deltas, and searchers fold them into one row now and then. No foreign
    # key: a tally dropped while a push runs must not fail the push (its late deltas are
    # swept, or counted in when the same query is tallied again). The trigger functions run as
    # the role that migrated (``SECURITY DEFINER``), so a writer needs no grant on the tallies.
    """
    CREATE TABLE pbot_tallies(
      key text PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('literal', 'terms')),
      pattern text,
      query tsquery,
      ready boolean NOT NULL DEFAULT false,
      used_at timestamptz NOT NULL DEFAULT now(),
      CHECK ((mode = 'literal') = (pattern IS NOT NULL) AND (mode = 'terms') = (query IS NOT NULL))
    );
    CREATE TABLE pbot_tally_deltas(key text NOT NULL, delta bigint NOT NULL);
    CREATE INDEX pbot_tally_deltas_key ON pbot_tally_deltas(key);
    CREATE FUNCTION pbot_tally_hit(t pbot_tallies, searchable boolean, lowered text, terms tsvector)
      RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
      SELECT searchable AND CASE WHEN t.mode = 'literal' THEN lowered LIKE t.pattern ELSE terms @@ t.query END
    $$;
    CREATE FUNCTION pbot_tally() RETURNS trigger LANGUAGE plpgsql
      SECURITY DEFINER SET search_path FROM CURRENT AS $$
    BEGIN
      -- (Each branch names a transition table only the triggers of its operations define.)
      IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO pbot_tally_deltas(key, delta) SELECT t.key, count(*) FROM pbot_tallies t
          JOIN pbot_added n ON pbot_tally_hit(t, n.searchable, n.text_lower, n.terms) GROUP BY t.key;
      END IF;
      IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO pbot_tally_deltas(key, delta) SELECT t.key, -count(*) FROM pbot_tallies t
          JOIN pbot_removed n ON pbot_tally_hit(t, n.searchable, n.text_lower, n.terms) GROUP BY t.key;
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER pbot_nodes_tally_insert AFTER INSERT ON pbot_nodes
      REFERENCING NEW TABLE AS pbot_added FOR EACH STATEMENT EXECUTE FUNCTION pbot_tally();
    CREATE TRIGGER pbot_nodes_tally_delete AFTER DELETE ON pbot_nodes
      REFERENCING OLD TABLE AS pbot_removed FOR EACH STATEMENT EXECUTE FUNCTION pbot_tally();
    CREATE TRIGGER pbot_nodes_tally_update AFTER UPDATE ON pbot_nodes
      REFERENCING OLD TABLE AS pbot_removed NEW TABLE AS pbot_added
      FOR EACH STATEMENT EXECUTE FUNCTION pbot_tally();
    """,
    # 3: raw memory (``team.raw_memory``): the sources on each session's current branch, as
    # the machine's local raw memory holds them (``memory_push.py``). A source is known by the
    # machine, its session, the entry it is anchored at and its part; ``hash`` is of its
    # content, so a replay, a restart or a second pusher of the same machine changes nothing.
    # ``context`` is the local label (historical / retained) and may change without the text.
    """
    CREATE TABLE pbot_memory(
      machine text NOT NULL,
      session_id text NOT NULL,
      entry_id text NOT NULL,
      part integer NOT NULL,
      os_user text NOT NULL,
      workspace text NOT NULL,
      kind text NOT NULL,
      timestamp text NOT NULL,
      label text NOT NULL,
      sections jsonb NOT NULL,
      line_count integer NOT NULL,
      context text NOT NULL CHECK (context IN ('historical', 'retained')),
      capped boolean NOT NULL,
      text text NOT NULL,
      text_json text,
      text_lower text NOT NULL,
      terms tsvector NOT NULL,
      hash text NOT NULL,
      pushed_at timestamptz NOT NULL DEFAULT now(),
      pushed_by text NOT NULL,
      PRIMARY KEY (machine, session_id, entry_id, part)
    );
    CREATE INDEX pbot_memory_literal ON pbot_memory USING gin (text_lower gin_trgm_ops);
    CREATE INDEX pbot_memory_terms ON pbot_memory USING gin (terms);
    CREATE INDEX pbot_memory_order ON pbot_memory((timestamp COLLATE "C") DESC, machine, session_id, entry_id, part);
    CREATE INDEX pbot_memory_session ON pbot_memory(session_id);
    CREATE INDEX pbot_memory_capped ON pbot_memory(machine) WHERE capped;
    """,
)


def applied(conn: psycopg.Connection) -> int:
    """The number of migrations this database has (0 when it has none)."""
    found = conn.execute("SELECT to_regclass('pbot_migrations') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM pbot_migrations").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: psycopg.Connection) -> list[int]:
    """Apply the missing migrations; the versions applied now (empty when up to date)."""
    done: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS pbot_migrations("
            "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        have = applied(conn)
        for version, sql in enumerate(MIGRATIONS, start=1):
            if version <= have:
                continue
            conn.execute(sql.encode())
            conn.execute("INSERT INTO pbot_migrations(version) VALUES (%s)", (version,))
            done.append(version)
    return done


def latest() -> int:
    return len(MIGRATIONS)
