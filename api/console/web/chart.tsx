// A uPlot chart in a labelled figure: the canvas is an image to assistive technology (role img,
// aria-label saying what it shows and its range of values), with a data-testid per metric. uPlot
// sizes its elements through element.style (allowed by the console's CSP, which forbids only
// inline <style> and style attributes in markup).
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";

export interface Series {
  label: string;
  values: number[];
  color: string;
}

const COLORS = ["#1f5fbf", "#b4530a", "#1d7a4b", "#8a3ab9", "#b3261e"];
export function color(i: number): string {
  return COLORS[i % COLORS.length] ?? "#1f5fbf";
}

export function Chart(props: {
  testId: string;
  label: string;
  /** x values: seconds since the epoch for a time axis, else bucket positions */
  x: number[];
  series: Series[];
  time?: boolean;
  bars?: boolean;
  format?: (v: number) => string;
  xFormat?: (v: number) => string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const width = Math.max(280, el.clientWidth);
    const fmt = props.format ?? ((v: number) => String(v));
    const bars = props.bars && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.8, 60] }) : undefined;
    const opts: uPlot.Options = {
      width,
      height: 220,
      legend: { show: props.series.length > 1 },
      cursor: { show: true, drag: { x: false, y: false } },
      scales: { x: { time: props.time ?? false } },
      axes: [
        props.xFormat ? { splits: () => props.x, values: (_u, ticks) => ticks.map((t) => props.xFormat?.(t) ?? String(t)) } : {},
        { values: (_u, ticks) => ticks.map(fmt), size: 64 },
      ],
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          fill: props.bars ? `${s.color}99` : `${s.color}1a`,
          paths: bars,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => (v === null ? "—" : fmt(v)),
        })),
      ],
    };
    const data: uPlot.AlignedData = [props.x, ...props.series.map((s) => s.values)];
    plot.current = new uPlot(opts, data, el);
    const resize = new ResizeObserver(() => {
      const w = Math.max(280, el.clientWidth);
      plot.current?.setSize({ width: w, height: 220 });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [props.x, props.series, props.time, props.bars]);

  return <div ref={box} class="chart" role="img" aria-label={props.label} data-testid={props.testId} data-points={props.x.length} />;
}
