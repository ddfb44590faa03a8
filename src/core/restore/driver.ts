/*
 * Whether the host's NVIDIA driver can run a CUDA build of torch. The numbers are NVIDIA's (the CUDA toolkit release
 * notes, "CUDA Toolkit and Corresponding Driver Versions", Linux x86_64): the driver each toolkit's GA release
 * shipped with, and the lowest driver of its major version under CUDA minor-version compatibility (a cu128 wheel
 * runs on a 525.60.13 driver, though a kernel that needs PTX JIT of a newer ISA may not).
 */

/** CUDA `major.minor` → the Linux driver of that toolkit's GA release. */
const TOOLKIT_DRIVER: Readonly<Record<string, string>> = {
  '11.6': '510.39.01',
  '11.7': '515.43.04',
  '11.8': '520.61.05',
  '12.0': '525.60.13',
  '12.1': '530.30.02',
  '12.2': '535.54.03',
  '12.3': '545.23.06',
  '12.4': '550.54.14',
  '12.5': '555.42.02',
  '12.6': '560.28.03',
  '12.8': '570.26',
  '12.9': '575.51.03',
  '13.0': '580.65.06',
};
/** CUDA major → the lowest driver that runs any minor of it (minor-version compatibility). */
const MAJOR_DRIVER: Readonly<Record<string, string>> = { '11': '450.80.02', '12': '525.60.13', '13': '580.65.06' };

export interface DriverCheck {
  /** `ok`: the driver is at least the toolkit's; `compat`: only through minor-version compatibility; `too-old`. */
  status: 'ok' | 'compat' | 'too-old' | 'no-driver' | 'unknown';
  cuda: string;
  driver: string | null;
  needs: string | null;
  message: string;
}

function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map((x) => parseInt(x, 10) || 0);
  const pb = b.split('.').map((x) => parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The driver check for torch built with CUDA `cuda` (`13.0`) on a host whose driver is `driver` (null: none seen). */
export function checkDriver(cuda: string, driver: string | null): DriverCheck {
  const mm = /^(\d+)\.(\d+)/.exec(cuda);
  const key = mm ? `${mm[1]}.${mm[2]}` : cuda;
  const major = mm ? mm[1]! : cuda;
  const toolkit = TOOLKIT_DRIVER[key] ?? null;
  const floor = MAJOR_DRIVER[major] ?? null;
  if (driver === null)
    return {
      status: 'no-driver',
      cuda,
      driver,
      needs: toolkit ?? floor,
      message: `torch is built for CUDA ${cuda}, and no NVIDIA driver was seen on the host (no nvidia-smi)`,
    };
  if (toolkit === null && floor === null)
    return {
      status: 'unknown',
      cuda,
      driver,
      needs: null,
      message: `CUDA ${cuda}: no driver requirement known to this version of Known Good; driver ${driver}`,
    };
  if (toolkit !== null && compareVersions(driver, toolkit) >= 0)
    return {
      status: 'ok',
      cuda,
      driver,
      needs: toolkit,
      message: `driver ${driver} runs CUDA ${cuda} (needs ≥ ${toolkit})`,
    };
  if (floor !== null && compareVersions(driver, floor) >= 0)
    return {
      status: 'compat',
      cuda,
      driver,
      needs: toolkit,
      message:
        `driver ${driver} is older than CUDA ${cuda}'s (${toolkit ?? '?'}): it runs only through CUDA minor-version ` +
        `compatibility (≥ ${floor}); kernels that need a newer PTX JIT fail`,
    };
  return {
    status: 'too-old',
    cuda,
    driver,
    needs: toolkit ?? floor,
    message: `driver ${driver} is too old for CUDA ${cuda}: it needs ≥ ${toolkit ?? floor} (update the driver first)`,
  };
}
