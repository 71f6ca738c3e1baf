import { callCountColumns, callStatsTable } from './storage-call-stats.js';
import { intoKept, ringTables, unloggedSlots } from './outbox/ring.js';
import { MAX_ATTEMPTS_KEPT } from '../../src/rules/deliveries.js';
import type { Migration } from './migrations.js';
import { type History, partitionName, partitionStatements } from './outbox/partitions.js';

/**
 * The record tables. Ids are `COLLATE "C"` so that ordering by id is code-unit order, as in every
 * other adapter, whatever the database's default collation. Date-times are `timestamptz`.
 * Never edit a released migration: add the next version.
 */
export const STORAGE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'records and outbox',
    statements: ({ table }) => [
      `CREATE TABLE ${table('webhooks')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        type text NOT NULL,
        url text NOT NULL,
        secret text NOT NULL,
        created_at timestamptz NOT NULL
      )`,
      // listWebhooks (oldest first); the fan-out of an event to the account's webhooks of its type.
      `CREATE INDEX portal_webhooks_account_created ON ${table('webhooks')} (account_id, created_at, id)`,
      `CREATE INDEX portal_webhooks_account_type ON ${table('webhooks')} (account_id, type)`,

      `CREATE TABLE ${table('file_entries')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        directory_id text COLLATE "C",
        type text NOT NULL CHECK (type IN ('file', 'directory')),
        name text NOT NULL,
        size bigint NOT NULL,
        mime text NOT NULL,
        file_share_id text,
        created_at timestamptz NOT NULL
      )`,
      // A directory listing; the root is directory_id IS NULL, which a btree index serves too.
      `CREATE INDEX portal_file_entries_directory ON ${table('file_entries')} (account_id, directory_id)`,

      `CREATE TABLE ${table('agreements')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        name text NOT NULL,
        status text NOT NULL CHECK (status IN ('sent', 'signed')),
        signer_name text NOT NULL,
        signer_signature text NOT NULL,
        signer_signature_hash text NOT NULL,
        created_at timestamptz NOT NULL
      )`,
      `CREATE TABLE ${table('agreement_signers')} (
        agreement_id text COLLATE "C" NOT NULL REFERENCES ${table('agreements')} (id) ON DELETE CASCADE,
        position integer NOT NULL,
        id text COLLATE "C" NOT NULL UNIQUE,
        first_name text NOT NULL,
        last_name text NOT NULL,
        email text NOT NULL,
        should_identify boolean NOT NULL,
        signature text,
        signature_hash text,
        signed_at timestamptz,
        PRIMARY KEY (agreement_id, position)
      )`,
      // The UNIQUE id also answers isBlobReferenced: a document's bytes are stored under its id.
      `CREATE TABLE ${table('agreement_documents')} (
        agreement_id text COLLATE "C" NOT NULL REFERENCES ${table('agreements')} (id) ON DELETE CASCADE,
        position integer NOT NULL,
        id text COLLATE "C" NOT NULL UNIQUE,
        document_name text NOT NULL,
        file_size bigint NOT NULL,
        file_hash text NOT NULL,
        PRIMARY KEY (agreement_id, position)
      )`,

      `CREATE TABLE ${table('attachments')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        ticket_id text NOT NULL,
        message_id text NOT NULL,
        name text NOT NULL,
        mime text NOT NULL,
        size bigint NOT NULL,
        created_at timestamptz NOT NULL
      )`,

      // json, not jsonb: the payload is never queried, and json keeps the host's key order and text.
      `CREATE TABLE ${table('events')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        type text NOT NULL,
        created_at timestamptz NOT NULL,
        data json
      )`,

      // attempts: a short append-only log (one entry per retry, about ten) always read and written
      // with its delivery and never searched, so a jsonb array instead of a table and a join.
      // webhook_id has no foreign key on purpose: a deleted webhook's deliveries stay as its log.
      `CREATE TABLE ${table('deliveries')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        webhook_id text COLLATE "C" NOT NULL,
        event_id text COLLATE "C" NOT NULL REFERENCES ${table('events')} (id),
        status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
        attempts jsonb NOT NULL DEFAULT '[]',
        next_attempt_at timestamptz,
        created_at timestamptz NOT NULL,
        lease_owner text,
        lease_until timestamptz
      )`,
      // listDeliveries (newest first) and the cancelling of a deleted webhook's pending deliveries.
      `CREATE INDEX portal_deliveries_webhook ON ${table('deliveries')} (webhook_id, created_at, id)`,
      // The claim: only pending rows are indexed, in the order they fall due.
      `CREATE INDEX portal_deliveries_due ON ${table('deliveries')} (next_attempt_at, id) WHERE status = 'pending'`,
    ],
  },
  {
    version: 2,
    name: 'creation order',
    // created_at holds whole seconds: lists documented as ordered follow creation exactly, so rows
    // made within one second are told apart by a sequence, not by their random ids.
    statements: ({ table, quotedSchema }) => [
      `ALTER TABLE ${table('webhooks')} ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
      `ALTER TABLE ${table('deliveries')} ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
      `DROP INDEX ${quotedSchema}.portal_deliveries_webhook`,
      `CREATE INDEX portal_deliveries_webhook ON ${table('deliveries')} (webhook_id, created_at, seq)`,
    ],
  },
  {
    version: 3,
    name: "delivery attempts capped, with a count; the fair claim's index",
    statements: ({ table }) => [
      `ALTER TABLE ${table('deliveries')} ADD COLUMN attempt_count integer NOT NULL DEFAULT 0`,
      `UPDATE ${table('deliveries')} SET attempt_count = jsonb_array_length(attempts)`,
      `UPDATE ${table('deliveries')} SET attempts = ${lastAttempts('attempts')} WHERE jsonb_array_length(attempts) > ${MAX_ATTEMPTS_KEPT}`,
      // The fair claim: the accounts with pending deliveries, and each one's in the order they fall due.
      `CREATE INDEX portal_deliveries_pending_account ON ${table('deliveries')} (account_id, next_attempt_at, id) WHERE status = 'pending'`,
    ],
  },
  {
    version: 4,
    name: 'webhook health',
    // A table of its own rather than columns of portal_webhooks: an attempt writes here, and a
    // webhook row stays free for publishes (FOR KEY SHARE) and deletes. No row until the first
    // attempt or disable: absent means healthy. disabled_by: the token of the write that disabled
    // the webhook, by which that write (and no other) knows it made the transition.
    statements: ({ table }) => [
      `CREATE TABLE ${table('webhook_health')} (
        webhook_id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        consecutive_failures integer NOT NULL DEFAULT 0,
        failing_since timestamptz,
        last_success_at timestamptz,
        last_attempt_at timestamptz,
        disabled_at timestamptz,
        disabled_reason text CHECK (disabled_reason IN ('gone', 'failing', 'manual')),
        disabled_by text
      )`,
    ],
  },
  {
    version: 5,
    name: 'webhook secret rotation',
    // The secret a rotation replaced, and until when it still signs calls; both NULL otherwise.
    statements: ({ table }) => [
      `ALTER TABLE ${table('webhooks')} ADD COLUMN previous_secret text, ADD COLUMN previous_secret_until timestamptz`,
    ],
  },
  {
    version: 6,
    name: 'idempotency keys',
    // One row per account and key: a claim while its request runs (`pending`, expires_at its lease),
    // then the answer kept for 24 hours (`completed`). answer_body is the JSON text sent, byte for byte.
    statements: ({ table }) => [
      `CREATE TABLE ${table('idempotency_keys')} (
        account_id text NOT NULL,
        key text COLLATE "C" NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'completed')),
        token text NOT NULL,
        fingerprint text,
        answer_status integer,
        answer_body text,
        answer_location text,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (account_id, key)
      )`,
      // The sweep of expired keys.
      `CREATE INDEX portal_idempotency_keys_expires ON ${table('idempotency_keys')} (expires_at)`,
    ],
  },
  {
    version: 7,
    name: 'agreements listed newest first',
    // listAgreements: created_at holds whole seconds, so a sequence orders those of one second (as
    // for webhooks in version 2); the index serves a page from a cursor, read backwards. Rows
    // already stored are numbered in no particular order within a second.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreements')} ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`,
      `CREATE INDEX portal_agreements_account_created ON ${table('agreements')} (account_id, created_at, seq)`,
    ],
  },
  {
    version: 8,
    name: 'the disabled webhooks, for the claim',
    // The fair claim cancels the due deliveries of disabled webhooks, found from here: with none
    // disabled, a probe of an empty index instead of a test of every due delivery.
    statements: ({ table }) => [
      `CREATE INDEX portal_webhook_health_disabled ON ${table('webhook_health')} (webhook_id) WHERE disabled_at IS NOT NULL`,
    ],
  },
  {
    version: 9,
    name: "signing: order, expiry, closing, reminders, each signer's link and steps, the audit trail",
    // Agreements stored before keep the seed's behaviour: parallel, no expiry, open.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreements')}
        ADD COLUMN signing_order text NOT NULL DEFAULT 'parallel' CHECK (signing_order IN ('parallel', 'sequential')),
        ADD COLUMN expires_at timestamptz,
        ADD COLUMN closed_at timestamptz,
        ADD COLUMN closed_reason text CHECK (closed_reason IN ('declined', 'expired')),
        ADD COLUMN next_reminder_at timestamptz`,
      // The tick reads only open agreements whose expiry or next reminder has come: two partial
      // indexes of the open ones with such a time, which an OR of the two reads together.
      `CREATE INDEX portal_agreements_expiring ON ${table('agreements')} (expires_at) WHERE status = 'sent' AND closed_at IS NULL AND expires_at IS NOT NULL`,
      `CREATE INDEX portal_agreements_reminding ON ${table('agreements')} (next_reminder_at) WHERE status = 'sent' AND closed_at IS NULL AND next_reminder_at IS NOT NULL`,
      `ALTER TABLE ${table('agreement_signers')}
        ADD COLUMN viewed_at timestamptz,
        ADD COLUMN declined_at timestamptz,
        ADD COLUMN decline_reason text,
        ADD COLUMN signing_link_id text`,
      // Append-only: each entry's JSON as it was hashed, at its position in the trail.
      `CREATE TABLE ${table('agreement_audit')} (
        agreement_id text COLLATE "C" NOT NULL REFERENCES ${table('agreements')} (id) ON DELETE CASCADE,
        position integer NOT NULL,
        entry text NOT NULL,
        PRIMARY KEY (agreement_id, position)
      )`,
    ],
  },
  {
    version: 10,
    name: 'the delivery log by event type; retention',
    statements: ({ table }) => [
      // A delivery names its event's type, so the log filters on it without the event (which
      // retention may remove first) and without a join.
      `ALTER TABLE ${table('deliveries')} ADD COLUMN event_type text`,
      `UPDATE ${table('deliveries')} AS d SET event_type = e.type FROM ${table('events')} AS e WHERE e.id = d.event_id`,
      `ALTER TABLE ${table('deliveries')} ALTER COLUMN event_type SET NOT NULL`,
      // Retention: finished deliveries oldest first; the events no delivery needs any more (the
      // foreign key's check on each removed event reads this index too); events oldest first.
      `CREATE INDEX portal_deliveries_finished ON ${table('deliveries')} (created_at) WHERE status <> 'pending'`,
      `CREATE INDEX portal_deliveries_event ON ${table('deliveries')} (event_id)`,
      `CREATE INDEX portal_events_created ON ${table('events')} (created_at)`,
    ],
  },
  {
    version: 11,
    name: 'a redeliver queued behind the call in flight',
    statements: ({ table }) => [
      `ALTER TABLE ${table('deliveries')} ADD COLUMN redeliver_queued boolean NOT NULL DEFAULT false`,
    ],
  },
  {
    version: 12,
    name: 'webhook filters; recent events of a type',
    statements: ({ table }) => [
      // json, not jsonb: the filter is shown as it was given, its keys in their order.
      `ALTER TABLE ${table('webhooks')} ADD COLUMN filter json`,
      // A filter's dry run reads an account's latest events of one type.
      `CREATE INDEX portal_events_recent ON ${table('events')} (account_id, type, created_at)`,
    ],
  },
  {
    version: 13,
    name: 'ordering keys',
    statements: ({ table }) => [
      `ALTER TABLE ${table('events')} ADD COLUMN ordering_key text`,
      `ALTER TABLE ${table('deliveries')} ADD COLUMN ordering_key text`,
      // A key's pending deliveries in creation order: whether a key is taken, and its next held one.
      `CREATE INDEX portal_deliveries_keyed ON ${table('deliveries')} (webhook_id, ordering_key, seq)
        WHERE status = 'pending' AND ordering_key IS NOT NULL`,
    ],
  },
  {
    version: 14,
    name: "each webhook's calls by the hour",
    statements: (names) => callStatsTable(names),
  },
  {
    version: 15,
    name: 'room on each page of deliveries for the claim',
    // The claim's lease changes no indexed column, so PostgreSQL can write it as a heap-only tuple
    // (no index entry) when the row's page has room. Filled to the brim, about a third of leases
    // in the fleet bench had none and wrote an entry in each of six indexes; with a fifth of each
    // new page left free, 87 % of them were heap-only, against 69 % (docs/performance.md, "Figures
    // behind the code": signing keys and fillfactor). Pages written before keep their fill.
    statements: ({ table }) => [`ALTER TABLE ${table('deliveries')} SET (fillfactor = 80)`],
  },
  {
    version: 16,
    name: "the audit trail's head kept with its agreement",
    // Written in the same UPDATE as the agreement, so an entry removed from the trail's end shows.
    // Agreements from before keep NULL (their trail is held to its chain) until their next step.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreements')} ADD COLUMN audit_head text, ADD COLUMN audit_length integer`,
    ],
  },
  {
    version: 17,
    name: 'open agreements with no reminder scheduled',
    // What the tick reads once reminders are turned on, to schedule those made while they were off;
    // empty again as soon as it has.
    statements: ({ table }) => [
      `CREATE INDEX portal_agreements_unscheduled ON ${table('agreements')} (created_at) WHERE status = 'sent' AND closed_at IS NULL AND next_reminder_at IS NULL`,
    ],
  },
  {
    version: 18,
    name: 'signer identification and mail to signers',
    // A signer's identification state (JSON: never a code, the access code as an scrypt hash); the
    // mail an agreement owes (JSON), and when the next is due, indexed while there is any.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreement_signers')} ADD COLUMN identity text`,
      `ALTER TABLE ${table('agreements')} ADD COLUMN mail text NOT NULL DEFAULT '[]', ADD COLUMN mail_due_at timestamptz`,
      `CREATE INDEX portal_agreements_mail_due ON ${table('agreements')} (mail_due_at) WHERE mail_due_at IS NOT NULL`,
    ],
  },
  {
    version: 19,
    name: 'completed copies of signed documents',
    // Each document's completed copy (its blob key, found by the orphan sweep through its index, and
    // its SHA-256), and the making still owed (JSON), with when it is due, indexed while owed.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreement_documents')} ADD COLUMN signed_file_hash text, ADD COLUMN signed_file_key text`,
      `CREATE UNIQUE INDEX portal_agreement_documents_signed_key ON ${table('agreement_documents')} (signed_file_key) WHERE signed_file_key IS NOT NULL`,
      `ALTER TABLE ${table('agreements')} ADD COLUMN completion text, ADD COLUMN completion_due_at timestamptz`,
      `CREATE INDEX portal_agreements_completion_due ON ${table('agreements')} (completion_due_at) WHERE completion_due_at IS NOT NULL`,
    ],
  },
  {
    version: 20,
    name: 'fields placed on documents; completed copies by hash',
    // The fields of a document, as JSON: read and written only with the document. And the completed
    // copies by their hash, for /verify.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreement_documents')} ADD COLUMN fields text NOT NULL DEFAULT '[]'`,
      `CREATE INDEX portal_agreement_documents_signed_hash ON ${table('agreement_documents')} (signed_file_hash) WHERE signed_file_hash IS NOT NULL`,
    ],
  },
  {
    version: 21,
    name: 'agreements the sender voided',
    // The check made in version 9 names the reasons; a voided agreement is closed for a third one.
    statements: ({ table }) => [
      `ALTER TABLE ${table('agreements')} DROP CONSTRAINT portal_agreements_closed_reason_check,
        ADD CONSTRAINT portal_agreements_closed_reason_check CHECK (closed_reason IN ('declined', 'expired', 'voided'))`,
    ],
  },
  {
    version: 22,
    name: 'the delivery queue apart from the delivery log',
    // The deliveries still to make (pending: due, leased, held behind their key) move to a queue of
    // their own, which the claim, the record and the keys read; a delivery leaves it when it
    // finishes, for portal_deliveries, which from now on holds finished deliveries only and is
    // written once a delivery (and by a redeliver, which takes one back to the queue). A delivery
    // keeps its seq, so the log's order holds across both.
    // The partial indexes of pending rows leave portal_deliveries but the due one, kept (empty) to
    // find a pending row an instance of an earlier version stores during an upgrade.
    statements: ({ table, quotedSchema }) => [
      `CREATE TABLE ${table('delivery_queue')} (
        id text COLLATE "C" PRIMARY KEY,
        account_id text NOT NULL,
        webhook_id text COLLATE "C" NOT NULL,
        event_id text COLLATE "C" NOT NULL REFERENCES ${table('events')} (id),
        status text NOT NULL DEFAULT 'pending' CHECK (status = 'pending'),
        attempts jsonb NOT NULL DEFAULT '[]',
        attempt_count integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        created_at timestamptz NOT NULL,
        event_type text NOT NULL,
        ordering_key text,
        lease_owner text,
        lease_until timestamptz,
        redeliver_queued boolean NOT NULL DEFAULT false,
        seq bigint NOT NULL
      ) WITH (fillfactor = 80)`,
      // One sequence for the queue and the log, standing alone (the log's identity column gives it
      // up): a delivery is numbered once, when queued, and keeps its number in the log. An instance
      // of an earlier release storing in the log meanwhile draws from it too.
      `CREATE SEQUENCE ${table('delivery_seq')} AS bigint`,
      // Past every number the identity gave (read from its sequence, not by scanning the log).
      `SELECT setval('${table('delivery_seq')}', nextval(pg_get_serial_sequence('${table('deliveries')}', 'seq')))`,
      `ALTER TABLE ${table('delivery_queue')} ALTER COLUMN seq SET DEFAULT nextval('${table('delivery_seq')}'::regclass)`,
      `ALTER TABLE ${table('deliveries')} ALTER COLUMN seq DROP IDENTITY`,
      `ALTER TABLE ${table('deliveries')} ALTER COLUMN seq SET DEFAULT nextval('${table('delivery_seq')}'::regclass)`,
      // The claim: in the order they fall due; the fair claim's, by account; a key's deliveries in
      // creation order; the log's pending part, newest first; the events still needed.
      `CREATE INDEX portal_delivery_queue_due ON ${table('delivery_queue')} (next_attempt_at, id)`,
      `CREATE INDEX portal_delivery_queue_account ON ${table('delivery_queue')} (account_id, next_attempt_at, id)`,
      `CREATE INDEX portal_delivery_queue_keyed ON ${table('delivery_queue')} (webhook_id, ordering_key, seq) WHERE ordering_key IS NOT NULL`,
      `CREATE INDEX portal_delivery_queue_webhook ON ${table('delivery_queue')} (webhook_id, created_at, seq)`,
      `CREATE INDEX portal_delivery_queue_event ON ${table('delivery_queue')} (event_id)`,
      `INSERT INTO ${table('delivery_queue')} (id, account_id, webhook_id, event_id, status, attempts, attempt_count,
          next_attempt_at, created_at, event_type, ordering_key, lease_owner, lease_until, redeliver_queued, seq)
        SELECT id, account_id, webhook_id, event_id, status, attempts, attempt_count, next_attempt_at, created_at,
          event_type, ordering_key, lease_owner, lease_until, redeliver_queued, seq
        FROM ${table('deliveries')} WHERE status = 'pending'`,
      `DELETE FROM ${table('deliveries')} WHERE status = 'pending'`,
      `DROP INDEX ${quotedSchema}.portal_deliveries_pending_account`,
      `DROP INDEX ${quotedSchema}.portal_deliveries_keyed`,
      // A delivery reaches the log from the queue, whose foreign key held its event; retention
      // removes an event only once neither names it. Checked again at each move, the key cost a
      // lock on the event row (and its WAL) a delivery.
      `ALTER TABLE ${table('deliveries')} DROP CONSTRAINT portal_deliveries_event_id_fkey`,
    ],
  },
  {
    version: 23,
    name: 'events and the delivery log in generations, partitions retention drops whole',
    // portal_events and portal_deliveries become partitioned (LIST, by generation: see
    // outbox/partitions.ts), the tables as they were adopted as generation 0 without moving a row:
    // a column with a constant default (no rewrite), a CHECK that proves the partition's bound (one
    // scan), and the attach, which then needs no scan. The parents have no index of their own, so the
    // old tables' indexes serve generation 0 as they are. Generations 1 (current) and 2 (ahead) and
    // the default partitions start empty. The queue's foreign key to events goes: a key cannot
    // name a partitioned table by id alone; retention keeps the events pending deliveries name.
    statements: (names) => {
      const { table, quotedSchema } = names;
      const adopt = (history: History, column: string) => [
        `ALTER TABLE ${table(history)} ADD COLUMN ${column} integer NOT NULL DEFAULT 0`,
        `ALTER TABLE ${table(history)} ADD CONSTRAINT ${partitionName(history, 0)}_bound CHECK (${column} = 0)`,
        `ALTER TABLE ${table(history)} RENAME TO ${partitionName(history, 0)}`,
        `CREATE TABLE ${table(history)} (LIKE ${quotedSchema}.${partitionName(history, 0)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
          PARTITION BY LIST (${column})`,
        `ALTER TABLE ${table(history)} DROP CONSTRAINT ${partitionName(history, 0)}_bound`,
        `ALTER TABLE ${table(history)} ATTACH PARTITION ${quotedSchema}.${partitionName(history, 0)} FOR VALUES IN (0)`,
        ...partitionStatements(names, history, 'default'),
        ...partitionStatements(names, history, 1),
        ...partitionStatements(names, history, 2),
      ];
      return [
        // Both tables first, in the order a publish of the release before locks them (events, then
        // the queue): dropping the key locked the queue, then events, and a publish holding events
        // and waiting for the queue deadlocked with it. A lock only: the schema made is the same.
        `LOCK TABLE ${table('events')}, ${table('delivery_queue')} IN ACCESS EXCLUSIVE MODE`,
        `ALTER TABLE ${table('delivery_queue')} DROP CONSTRAINT portal_delivery_queue_event_id_fkey`,
        // 0 by default, as events' gen: an instance of the release before, still running during the
        // upgrade, stores its events in generation 0 and its deliveries naming it.
        `ALTER TABLE ${table('delivery_queue')} ADD COLUMN event_gen integer NOT NULL DEFAULT 0`,
        // started_at: -infinity for what came before; generation 1 begins now, by the database's clock
        // (the first rotation goes by the host's clock, see rotateHistory).
        // until: the latest created_at of the generation's events, learnt once it is closed;
        // log_until: of its deliveries, when a drop found a later one (a recovered delivery).
        `CREATE TABLE ${table('generations')} (
          gen integer PRIMARY KEY,
          started_at timestamptz NOT NULL,
          until timestamptz,
          log_until timestamptz
        )`,
        `INSERT INTO ${table('generations')} (gen, started_at) VALUES (0, '-infinity'), (1, now())`,
        ...adopt('events', 'gen'),
        // The log's CHECK of status goes from generation 0 to the parent (LIKE … INCLUDING
        // CONSTRAINTS), and from the parent to each new partition.
        ...adopt('deliveries', 'event_gen'),
      ];
    },
  },
  {
    version: 24,
    name: 'portal sessions',
    statements: ({ table }) => [
      // secret_hash: hex SHA-256 of the token's secret part; the token itself is never kept.
      `CREATE TABLE ${table('sessions')} (
        id text PRIMARY KEY,
        account_id text NOT NULL,
        secret_hash text NOT NULL,
        scopes text[] NOT NULL,
        read_only boolean NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        revoked_at timestamptz
      )`,
      // The sweep's, and the one an insert counts the account's live sessions in.
      `CREATE INDEX portal_sessions_expires ON ${table('sessions')} (expires_at)`,
      `CREATE INDEX portal_sessions_unrevoked ON ${table('sessions')} (account_id, expires_at) WHERE revoked_at IS NULL`,
    ],
  },
  {
    version: 25,
    name: "erasable personal data; the signers' language",
    statements: ({ table }) => [
      // The key an agreement's trail commits to personal fields with (null: made before it).
      `ALTER TABLE ${table('agreements')} ADD COLUMN personal_key text`,
      // The signers' language (null: English).
      `ALTER TABLE ${table('agreements')} ADD COLUMN locale text`,
      // An agreement's events, for erasure: agreement events only, so other events pay nothing.
      `CREATE INDEX portal_events_agreement ON ${table('events')} (account_id, ordering_key) WHERE type LIKE 'agreement-%'`,
    ],
  },
  {
    version: 26,
    name: 'webhooks held by Retry-After',
    statements: ({ table }) => [
      // Until when the receiver asked its calls to wait (null: never held).
      `ALTER TABLE ${table('webhook_health')} ADD COLUMN held_until timestamptz`,
      // The claim reads the webhooks held now from it: an empty probe while none ever was.
      `CREATE INDEX portal_webhook_health_held ON ${table('webhook_health')} (held_until) WHERE held_until IS NOT NULL`,
    ],
  },
  {
    version: 27,
    name: 'rate limits and calls in flight',
    statements: ({ table }) => [
      // Calls a second at most (null: none), and where its pacing stands: the second it fills and
      // how many of that second's slots are given (rules/rate-limit.ts, paceSlots).
      `ALTER TABLE ${table('webhooks')} ADD COLUMN rate_limit integer`,
      `ALTER TABLE ${table('webhooks')} ADD COLUMN pace_second timestamptz`,
      `ALTER TABLE ${table('webhooks')} ADD COLUMN pace_used integer NOT NULL DEFAULT 0`,
      // The claims and the pacing read the limited webhooks from it: an empty probe while none is.
      `CREATE INDEX portal_webhooks_limited ON ${table('webhooks')} (account_id, id) WHERE rate_limit IS NOT NULL`,
      // A delivery of a limited webhook given its slot, which its lease spends (a constant default:
      // no table rewrite).
      `ALTER TABLE ${table('delivery_queue')} ADD COLUMN paced boolean NOT NULL DEFAULT false`,
      // The calls in flight a worker last limited the webhook to (null: none), for the health to show.
      `ALTER TABLE ${table('webhook_health')} ADD COLUMN in_flight_limit integer`,
    ],
  },
  {
    version: 28,
    name: 'the delivery queue and the call counts in a ring of partitions truncated whole',
    // portal_queue takes portal_delivery_queue's place: the same columns and indexes, partitioned by
    // LIST (slot) into the ring's slots 0 and 1 and the kept partition (-1); portal_call_counts holds
    // the counts not yet added to their hours (outbox/ring.ts). portal_delivery_queue stays, for
    // the instances of the release before still running during the upgrade (which use it alone):
    // this release's claims move what those queue there into the kept partition once no lease
    // holds it. A partitioned table's key would have to hold the slot: ids are indexed, not
    // unique (a delivery is in one partition at a time, moved by a delete and an insert).
    statements: (names) => {
      const { table } = names;
      const queueColumns = `id text COLLATE "C" NOT NULL,
        account_id text NOT NULL,
        webhook_id text COLLATE "C" NOT NULL,
        event_id text COLLATE "C" NOT NULL,
        status text NOT NULL DEFAULT 'pending' CHECK (status = 'pending'),
        attempts jsonb NOT NULL DEFAULT '[]',
        attempt_count integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        created_at timestamptz NOT NULL,
        event_type text NOT NULL,
        ordering_key text,
        lease_owner text,
        lease_until timestamptz,
        redeliver_queued boolean NOT NULL DEFAULT false,
        seq bigint NOT NULL DEFAULT nextval('${table('delivery_seq')}'::regclass),
        event_gen integer NOT NULL DEFAULT 0,
        paced boolean NOT NULL DEFAULT false`;
      return [
        ...ringTables(names, queueColumns, callCountColumns),
        // As portal_delivery_queue's (migration 22), each made on every partition.
        `CREATE INDEX portal_queue_id ON ${table('queue')} (id)`,
        `CREATE INDEX portal_queue_due ON ${table('queue')} (next_attempt_at, id)`,
        `CREATE INDEX portal_queue_account ON ${table('queue')} (account_id, next_attempt_at, id)`,
        `CREATE INDEX portal_queue_keyed ON ${table('queue')} (webhook_id, ordering_key, seq) WHERE ordering_key IS NOT NULL`,
        `CREATE INDEX portal_queue_webhook ON ${table('queue')} (webhook_id, created_at, seq)`,
        `CREATE INDEX portal_queue_event ON ${table('queue')} (event_id)`,
        // What no lease holds moves now; the rest once its lease is recorded or runs out (claim.ts).
        `WITH moved AS (
          DELETE FROM ${table('delivery_queue')} WHERE lease_until IS NULL OR lease_until < now() RETURNING *
        )
        ${intoKept(names, 'moved')}`,
      ];
    },
  },
  {
    version: 29,
    name: "the ring's slots unlogged, and the notes of what each publish put in them",
    // A publish's untried deliveries write no WAL in the slots; what a crash of the server empties
    // there is made again from the notes (outbox/ring.ts, rebuild.ts).
    statements: unloggedSlots,
  },
];

/** The last `MAX_ATTEMPTS_KEPT` entries of the jsonb array `expression`, in order. */
export function lastAttempts(expression: string): string {
  return `(SELECT coalesce(jsonb_agg(kept.entry ORDER BY kept.position), '[]'::jsonb)
    FROM jsonb_array_elements(${expression}) WITH ORDINALITY AS kept(entry, position)
    WHERE kept.position > jsonb_array_length(${expression}) - ${MAX_ATTEMPTS_KEPT})`;
}
