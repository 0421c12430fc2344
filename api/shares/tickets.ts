// Sign-in tickets are single-use across every API replica (docs/shares.md): the first replica to
// take a ticket records its id in PostgreSQL; any later use, on any replica, is refused. A ticket
// lives a minute, so the table stays small: expired rows go as new tickets are taken.
import type { MikroORM } from "@mikro-orm/postgresql";

export interface TicketLedger {
  /** True the first time `jti` is taken, false ever after (until it has expired anyway). */
  take(jti: string, expiresAtSeconds: number): Promise<boolean>;
}

export class PgTicketLedger implements TicketLedger {
  readonly #orm: MikroORM;

  constructor(orm: MikroORM) {
    this.#orm = orm;
  }

  async take(jti: string, expiresAtSeconds: number): Promise<boolean> {
    const conn = this.#orm.em.getConnection();
    await conn.execute(`delete from used_sign_in_tickets where expires_at < now()`);
    const taken = await conn.execute<{ jti: string }[]>(
      `insert into used_sign_in_tickets (jti, expires_at) values (?, to_timestamp(?)) on conflict do nothing returning jti`,
      [jti, expiresAtSeconds],
    );
    return taken.length === 1;
  }
}
