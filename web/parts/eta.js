// parts/eta.js — when waiting work may start: the scheduler's estimate
// (request.eta, the latest time by the maximum runtimes of the work ahead)
// or why it has none (request.eta_reason, a fixed English sentence that is
// translated here; an unknown one is shown as the server wrote it).
import { t, formatDate } from '../i18n.js';

const WHY = {
  'no node of its pool takes work now': 'eta.why.noNodes',
  'the nodes of its pool are failing to start containers': 'eta.why.degraded',
  'no node that takes work now has a driver for its CUDA version': 'eta.why.cuda',
  'it cannot start as asked': 'eta.why.cannot',
  'its quota does not admit it': 'eta.why.quota',
  'it waits for work that has no maximum runtime to end': 'eta.why.never',
  'no node that takes work now could hold it, or its quota could not': 'eta.why.noRoom',
  'too far back in the queue to estimate': 'eta.why.far',
};

// The sentence for a queued request, or '' when the scheduler has not said.
export function etaText(request) {
  if (!request || request.state !== 'queued') return '';
  if (request.eta) return t('eta.at', { time: formatDate(request.eta) });
  if (request.eta_reason) return t('eta.none', { why: WHY[request.eta_reason] ? t(WHY[request.eta_reason]) : request.eta_reason });
  return '';
}
