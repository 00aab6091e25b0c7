/** Test certificates: a self-signed PEM pair for one host name (and addresses), valid between two dates. */
import { generate } from 'selfsigned';

/** certificatePems makes a certificate naming `host` (and `ips`), valid from `from` to `to`. */
export async function certificatePems(
  host: string,
  from: Date,
  to: Date,
  ips: string[] = [],
): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: 'commonName', value: host }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: from,
    notAfterDate: to,
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [{ type: 2, value: host }, ...ips.map((ip) => ({ type: 7 as const, ip }))],
      },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}
