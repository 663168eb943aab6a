// Image classification's postprocessing; the spec is bundler/tasks/classify.py.

export function labelOf(task, index) {
  return task.labels && index < task.labels.length ? task.labels[index] : String(index);
}

export function topClasses(output, task, topK) {
  const [batch] = output.dims.length > 1 ? output.dims : [1];
  let values = Float64Array.from(output.data.subarray(0, output.data.length / batch), Number);
  if (task.activation === 'sigmoid') {
    values = values.map((value) => 1 / (1 + Math.exp(-value)));
  } else if (task.softmax !== false) {
    let max = -Infinity;
    for (const value of values) max = Math.max(max, value);
    const exp = values.map((value) => Math.exp(value - max));
    const sum = exp.reduce((total, value) => total + value, 0);
    values = exp.map((value) => value / sum);
  }
  const order = [...values.keys()].sort((a, b) => values[b] - values[a] || a - b);
  const count = topK ?? task.top_k ?? 5;
  return order.slice(0, count).map((index) => ({ label: labelOf(task, index), index,
                                                 score: values[index] }));
}
