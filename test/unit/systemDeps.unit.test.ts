// `npm run demo` and `npm test` check the Debian packages they need at their start (scripts/system-deps.mjs), with
// dpkg-query, apt-get and sudo replaced by recording stand-ins on PATH.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

const ROOT = resolve(__dirname, '../..');
const SCRIPT = join(ROOT, 'scripts/system-deps.mjs');
const LIST = readFileSync(join(ROOT, 'scripts/system-packages.txt'), 'utf8');
const names = (purpose: string) =>
  LIST.split('\n')
    .map((l) => l.replace(/#.*$/, '').trim())
    .filter(Boolean)
    .map((l) => l.split(/\s+/))
    .filter(([, uses]) => purpose === 'all' || (uses ?? '').split(',').includes(purpose))
    .map(([name]) => name!);

describe('system packages: one list for npm run demo, npm test and .ci/run', () => {
  let dir: string;
  let bin: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kg-sysdeps-'));
    bin = join(dir, 'bin');
    spawnSync('mkdir', ['-p', bin]);
    // the "not root" case runs as nobody: it reads the stand-ins and writes the log here
    chmodSync(dir, 0o777);
    // dpkg-query: what `installed` lists is installed; apt-get install adds to it and records its arguments.
    const script = (name: string, body: string) => {
      writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(bin, name), 0o755);
    };
    script(
      'dpkg-query',
      `for p in "$@"; do case "$p" in -*) continue;; esac
        if grep -qx "$p" "${dir}/installed" 2>/dev/null; then echo "$p installed"; else echo "$p not-installed"; fi
      done`,
    );
    script(
      'apt-get',
      `echo "apt-get $*" >> "${dir}/log"
       [ "$1" = install ] && for p in "$@"; do case "$p" in -*|install) ;; *) echo "$p" >> "${dir}/installed";; esac; done
       exit 0`,
    );
    script('sudo', `echo "sudo $*" >> "${dir}/log"; exit 1`);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = (args: string[], asUser?: string) => {
    const env = { ...process.env, PATH: `${bin}:${process.env['PATH']}` };
    const cmd = asUser
      ? ['runuser', '-u', asUser, '--', process.execPath, SCRIPT, ...args]
      : [process.execPath, SCRIPT, ...args];
    return spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8', env });
  };
  const reset = (installed: string[]) => {
    writeFileSync(join(dir, 'installed'), installed.map((n) => `${n}\n`).join(''));
    rmSync(join(dir, 'log'), { force: true });
  };

  it('the list names what each command needs', () => {
    assert.deepEqual(names('demo').sort(), ['build-essential', 'libkrb5-dev', 'python3', 'ripgrep']);
    for (const p of ['openssh-server', 'python3-torch', 'chromium', 'ripgrep', 'libkrb5-dev'])
      assert.ok(names('test').includes(p), p);
    const listed = run(['list', 'all']);
    assert.deepEqual(listed.stdout.trim().split('\n'), names('all'));
  });

  it('everything installed: nothing to do, apt-get not called', () => {
    reset(names('all'));
    const r = run(['test']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(existsSync(join(dir, 'log')), false);
  });

  it(
    'as root: the missing packages are installed with apt-get, without asking',
    { skip: process.getuid?.() !== 0 },
    () => {
      reset(names('all').filter((n) => n !== 'ripgrep' && n !== 'chromium'));
      const r = run(['test']);
      assert.equal(r.status, 0, r.stderr + r.stdout);
      const log = readFileSync(join(dir, 'log'), 'utf8').trim().split('\n');
      assert.deepEqual(log, ['apt-get update -qq', 'apt-get install -y -qq --no-install-recommends ripgrep chromium']);
    },
  );

  it('without root or passwordless sudo: stops with the one command to run', () => {
    reset(names('all').filter((n) => n !== 'python3-torch'));
    const isRoot = process.getuid?.() === 0;
    const r = run(['test'], isRoot ? 'nobody' : undefined);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /npm test needs these Debian packages, not installed: python3-torch\./);
    assert.match(
      r.stderr,
      /^ {2}sudo apt-get update && sudo apt-get install -y --no-install-recommends python3-torch$/m,
    );
    const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : '';
    assert.doesNotMatch(log, /apt-get/);
    assert.match(log, /^sudo -n true$/m, 'asked sudo whether it needs a password');
  });

  it('npm test and npm run demo check first; .ci/run installs the list and runs exactly npm test', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.match(pkg.scripts['test']!, /^node scripts\/system-deps\.mjs test && /);
    assert.match(pkg.scripts['demo']!, /^node scripts\/system-deps\.mjs demo && /);
    const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8');
    assert.match(ci, /scripts\/system-deps\.mjs list all/);
    assert.equal(ci.trim().split('\n').pop(), 'npm test');
  });
});
