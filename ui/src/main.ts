import { tauriStatus } from "./ipc";
import { live } from "./live";

const root = document.getElementById("app");
if (root) live(root, tauriStatus);
