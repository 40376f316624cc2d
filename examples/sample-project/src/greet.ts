export function greet(name: string): string {
  return `Hello, ${name}!`;
}

export function greetAll(names: string[]): string[] {
  return names.map((name) => greet(name));
}
