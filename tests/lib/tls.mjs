// A throw-away certificate authority for the TLS suites, made at test time with
// the openssl command line:
//
//   createTestCa()  -> {dir, caCert, caPem, cert, key, certPem, cleanup()}
//     caCert   path of the CA certificate (PEM): give it to curl --cacert, to
//              node's `ca` option or to NODE_EXTRA_CA_CERTS
//     cert     path of the server certificate, signed by the CA, valid for
//              DNS:localhost and IP:127.0.0.1 (give it and `key` to tls_listen)
//     key      path of the server's private key
//     cleanup  removes the directory (startTopology calls it from stop())
//
// Keys are P-256: generating them takes milliseconds, where RSA can take a
// second on a busy machine. Nothing here is cached between calls: each suite
// gets its own CA, so a client that trusts one suite's CA cannot reach another
// suite's gateway by accident.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Runs the openssl CLI in `dir`; RANDFILE points into it so that a run never
// writes a seed file into the home directory. Throws with openssl's stderr.
function openssl(dir, args) {
  try {
    return execFileSync('openssl', args, {
      cwd: dir,
      env: { ...process.env, RANDFILE: join(dir, '.rnd') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    throw new Error(`openssl ${args.join(' ')} failed: ${err.stderr?.toString() || err.message}`);
  }
}

export function createTestCa({ commonName = 'localhost', altNames = ['DNS:localhost', 'IP:127.0.0.1'] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'kimi-relay-tls-'));
  const path = (name) => join(dir, name);
  try {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

    // The CA: self-signed, allowed to sign certificates and nothing else.
    openssl(dir, [
      'req', '-x509', ...ec,
      '-keyout', path('ca.key'), '-out', path('ca.crt'),
      '-days', '2', '-subj', '/O=kimi-relay tests/CN=kimi-relay test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE',
      '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
      '-addext', 'subjectKeyIdentifier=hash',
    ]);

    // The server: a request, then the CA's signature with the extensions a
    // modern client checks (SAN, not CN; serverAuth).
    openssl(dir, [
      'req', ...ec,
      '-keyout', path('server.key'), '-out', path('server.csr'),
      '-subj', `/O=kimi-relay tests/CN=${commonName}`,
    ]);
    writeFileSync(
      path('server.ext'),
      [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth',
        `subjectAltName=${altNames.join(',')}`,
        'authorityKeyIdentifier=keyid,issuer',
        'subjectKeyIdentifier=hash',
        '',
      ].join('\n'),
    );
    openssl(dir, [
      'x509', '-req', '-in', path('server.csr'),
      '-CA', path('ca.crt'), '-CAkey', path('ca.key'), '-set_serial', '0x' + Date.now().toString(16),
      '-days', '2', '-sha256', '-extfile', path('server.ext'), '-out', path('server.crt'),
    ]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    dir,
    caCert: path('ca.crt'),
    caPem: readFileSync(path('ca.crt'), 'utf8'),
    cert: path('server.crt'),
    key: path('server.key'),
    certPem: readFileSync(path('server.crt'), 'utf8'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
