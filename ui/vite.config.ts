import { defineConfig } from "vitest/config";

// The Tauri CLI expects the dev server on a fixed port (tauri.conf.json `build.devUrl`).
export default defineConfig({
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  build: { target: "safari15", outDir: "dist", emptyOutDir: true },
  test: {
    environment: "happy-dom",
    include: ["src/**/*.test.ts"],
  },
});
