import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hostNode, hostNodeId, nodeId, opensByDefault } from '../../src/core/runs/model';
import { RemoteRunsViewState, VIEW_STATE_KEY, type KeptStore } from '../../src/core/runs/viewState';

/** workspaceState as VS Code keeps it: values go through JSON (a reload reads back only what was serialised). */
class JsonStore implements KeptStore {
  readonly saved = new Map<string, string>();
  writes = 0;
  get<T>(key: string): T | undefined {
    const v = this.saved.get(key);
    return v === undefined ? undefined : (JSON.parse(v) as T);
  }
  update(key: string, value: unknown): Promise<void> {
    this.writes++;
    this.saved.set(key, JSON.stringify(value));
    return Promise.resolve();
  }
}

const host = hostNodeId('gpu-1');
const root = nodeId('gpu-1', '/ckpt', '');
const run = nodeId('gpu-1', '/ckpt', 'run-a');
const step = nodeId('gpu-1', '/ckpt', 'run-a/step_600');

void describe('RemoteRunsViewState: Remote Runs as the person left it, across a reload', () => {
  void it('expanded and collapsed rows, the selection and the compare choice survive a new instance', () => {
    const store = new JsonStore();
    const before = new RemoteRunsViewState(store);
    before.setExpanded(host, true);
    before.setExpanded(run, true);
    before.setExpanded(root, false);
    before.setExpanded(root, true);
    before.setSelection({ hostId: 'gpu-1', ids: [root, run, step] });
    before.setCompare({ hostId: 'gpu-1', path: '/ckpt/run-a/step_600/checkpoint.pt', label: 'step_600' });

    const after = new RemoteRunsViewState(store);
    assert.equal(after.expansionOf(host), true);
    assert.equal(after.expansionOf(root), true);
    assert.equal(after.expansionOf(run), true);
    assert.equal(after.expansionOf(step), undefined, 'a row never touched has no kept state');
    assert.deepEqual(after.selection(hostNodeId, opensByDefault), { hostId: 'gpu-1', ids: [root, run, step] });
    assert.deepEqual(after.compare(), {
      hostId: 'gpu-1',
      path: '/ckpt/run-a/step_600/checkpoint.pt',
      label: 'step_600',
    });
  });

  void it('a selected row under a collapsed row is not shown again; one under a root never touched is', () => {
    const s = new RemoteRunsViewState(new JsonStore());
    s.setSelection({ hostId: 'gpu-1', ids: [root, run] });
    assert.equal(s.selection(hostNodeId, opensByDefault), undefined, 'its host was never expanded');
    s.setExpanded(host, true);
    assert.deepEqual(s.selection(hostNodeId, opensByDefault), { hostId: 'gpu-1', ids: [root, run] });
    s.setExpanded(root, false);
    assert.equal(s.selection(hostNodeId, opensByDefault), undefined, 'its root was collapsed by hand');
    s.setSelection({ hostId: 'gpu-1', ids: [] });
    assert.deepEqual(s.selection(hostNodeId, opensByDefault), { hostId: 'gpu-1', ids: [] }, 'a host row is visible');
    s.setSelection(undefined);
    assert.equal(s.selection(hostNodeId, opensByDefault), undefined);
  });

  void it('keeps the newest rows within its bound, a row changed again counting as new', () => {
    const store = new JsonStore();
    const s = new RemoteRunsViewState(store, 3);
    for (const id of ['a', 'b', 'c']) s.setExpanded(id, true);
    s.setExpanded('a', false);
    s.setExpanded('d', true);
    const again = new RemoteRunsViewState(store, 3);
    assert.deepEqual(
      ['a', 'b', 'c', 'd'].map((id) => again.expansionOf(id)),
      [false, undefined, true, true],
    );
  });

  void it('writes only on a change', () => {
    const store = new JsonStore();
    const s = new RemoteRunsViewState(store);
    s.setExpanded(host, true);
    s.setExpanded(host, true);
    s.setSelection({ hostId: 'gpu-1', ids: [root] });
    s.setSelection({ hostId: 'gpu-1', ids: [root] });
    s.setCompare(undefined);
    assert.equal(store.writes, 2);
  });

  void it('state of another shape (an older version, a hand edit) is dropped, not thrown', () => {
    for (const bad of [42, 'x', { rows: [['a', 'yes']] }, { selection: { hostId: 1 } }, null]) {
      const store = new JsonStore();
      store.saved.set(VIEW_STATE_KEY, JSON.stringify(bad));
      const s = new RemoteRunsViewState(store);
      assert.equal(s.expansionOf('a'), undefined);
      assert.equal(s.compare(), undefined);
    }
  });

  void it('roots open by default; hosts, runs and checkpoints do not', () => {
    assert.equal(opensByDefault(root), true);
    assert.equal(opensByDefault(host), false);
    assert.equal(opensByDefault(run), false);
    assert.equal(opensByDefault(nodeId('root', '/x', 'y')), false, 'a host named "root" is not a root');
  });
});

void describe('host rows before they connect (what a reloaded window shows first)', () => {
  void it('This machine says nothing about connecting; an SSH host says so in its tooltip only', () => {
    const local = hostNode({ id: 'local', label: 'This machine', state: 'disconnected', local: true });
    assert.equal(local.description ?? '', '');
    assert.doesNotMatch(local.tooltip ?? '', /connect/);
    const ssh = hostNode({ id: 'gpu-1', label: 'gpu-1', state: 'disconnected', detail: 'root@10.0.0.5:22' });
    assert.equal(ssh.description, 'root@10.0.0.5:22');
    assert.match(ssh.tooltip ?? '', /not connected: open it to connect/);
    assert.equal(ssh.icon, 'vm-outline');
    const listing = hostNode({ id: 'gpu-1', label: 'gpu-1', state: 'listing', detail: 'root@10.0.0.5:22' });
    assert.equal(listing.description, 'root@10.0.0.5:22 · listing…', 'work under way still shows');
  });
});
