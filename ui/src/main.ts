// One UI for both windows: the status window (`main`) and the approval window (`approvals`).
import { approvalsWindow } from "./approvals-live";
import { tauriActions, tauriApis, tauriApprovals, tauriStatus, windowLabel } from "./ipc";
import { live } from "./live";

const root = document.getElementById("app");
if (root) {
  if (windowLabel() === "approvals") {
    document.title = "Postern: approval requested";
    approvalsWindow(root, tauriApprovals);
  } else {
    live(root, tauriStatus, { actions: tauriActions, apis: tauriApis });
  }
}
