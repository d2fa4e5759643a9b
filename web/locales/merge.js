// locales/merge.js — one language's dictionary from its per-area parts. A key
// defined by two parts is a mistake (one would silently win), so it throws.
export function merge(...parts) {
  const dict = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part)) {
      if (key in dict) throw new Error(`dictionary key ${key} is defined twice`);
      dict[key] = value;
    }
  }
  return dict;
}
