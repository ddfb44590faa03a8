/** The dashboard's GPU series (core/hardware/gpuPlot.ts builds them, webview/src/gpu.ts places them). */
export const GPU_SERIES = {
  sm: 'gpu: SM clock MHz',
  util: 'gpu: utilization %',
  power: 'gpu: power W',
} as const;
