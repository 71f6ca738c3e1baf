import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
const nc = await connect({ servers: '127.0.0.1:4222' });
try { await jetstream(nc).publish('nowhere-x', 'hi', { retries: 0, timeout: 1000 }); } catch (e) { console.log(e.constructor.name, e.name, e.message, e.code, e.cause?.constructor?.name, e.cause?.message); }
await nc.close();
